package configs

import (
	"strings"
	"testing"
)

func TestValidateBudgets(t *testing.T) {
	tests := map[string]struct {
		set  func(*Config)
		want string
	}{
		"max_offers zero":     {func(c *Config) { c.DHCP.MaxOffers = 0 }, "dhcp.max_offers"},
		"new clients zero":    {func(c *Config) { c.DHCP.NewClientsPerSecond = 0 }, "dhcp.new_clients_per_second"},
		"sightings too small": {func(c *Config) { c.DHCP.MaxSightings = 3 }, "dhcp.max_sightings"},
		"queue entries":       {func(c *Config) { c.Records.QueueEntries = -1 }, "records.queue_entries"},
		"queue mib":           {func(c *Config) { c.Records.QueueMiB = 0 }, "records.queue_mib"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := Default()
			tt.set(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "default") {
				t.Errorf("Validate() = %v, want an error naming %s and its default", err, tt.want)
			}
		})
	}
	c := Default()
	if c.DHCP.MaxOffers != 1024 || c.DHCP.NewClientsPerSecond != 100 || c.DHCP.MaxSightings != 4096 ||
		c.Records.QueueEntries != 65536 || c.Records.QueueMiB != 64 {
		t.Errorf("defaults: %+v %+v", c.DHCP, c.Records)
	}
}
