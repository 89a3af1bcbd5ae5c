package configs

import (
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Images bounds the decompression cache under <data>/cache, where
// compressed-only images (NAME.zst, NAME.gz) are unpacked for serving; see
// package images. The defaults are far above what a lab uses and only stop
// a runaway root from filling the data filesystem.
type Images struct {
	// CacheMaxBytes caps the unpacked images in the cache together; least
	// recently used entries no client is downloading are evicted to make
	// room, else the request is refused. Default 256GiB.
	CacheMaxBytes ByteSize `yaml:"cache_max_bytes"`
	// MinFreeBytes is the free space an unpack must leave on the data
	// filesystem (checked with statfs before it starts and as it writes).
	// Default 1GiB.
	MinFreeBytes ByteSize `yaml:"min_free_bytes"`
	// MaxUnpackedBytes caps one image's unpacked size (a decompression
	// bomb stops there). Default 64GiB.
	MaxUnpackedBytes ByteSize `yaml:"max_unpacked_bytes"`
}

// validateImages checks the images section.
func (c *Config) validateImages(add func(key, format string, a ...any)) {
	im := &c.Images
	if im.CacheMaxBytes < 1<<20 {
		add("images.cache_max_bytes", "%s is too small to hold an image; use e.g. 256GiB (the cache is bounded by min_free_bytes too)", im.CacheMaxBytes)
	}
	if im.MinFreeBytes < 0 {
		add("images.min_free_bytes", "%s must not be negative; use e.g. 1GiB, or 0 to check nothing", im.MinFreeBytes)
	}
	if im.MaxUnpackedBytes < 1<<20 {
		add("images.max_unpacked_bytes", "%s is too small for a boot image; use e.g. 64GiB", im.MaxUnpackedBytes)
	} else if im.CacheMaxBytes >= 1<<20 && im.MaxUnpackedBytes > im.CacheMaxBytes {
		add("images.cache_max_bytes", "%s is less than images.max_unpacked_bytes (%s), so an image that large could never be cached; raise the cap or lower max_unpacked_bytes too", im.CacheMaxBytes, im.MaxUnpackedBytes)
	}
}

// ByteSize is a number of bytes, written as a whole number or with a unit
// (ParseSize's forms): B, K/M/G/T or KiB/MiB/GiB/TiB (powers of 1024),
// KB/MB/GB/TB (powers of 1000), e.g. 64GiB or 500MB.
type ByteSize int64

// ParseByteSize parses "64GiB", "500MB", "1048576" or "0" as ParseSize
// does; a negative size is read too, so that Validate refuses it by its key.
func ParseByteSize(s string) (ByteSize, error) {
	n, err := parseSize(s)
	return ByteSize(n), err
}

// String writes the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	if b != 0 {
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if int64(b)%u.mult == 0 {
				return strconv.FormatInt(int64(b)/u.mult, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Msg: "a size is one value, e.g. 64GiB"}
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return &Error{Line: n.Line, Msg: err.Error()}
	}
	*b = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }
