package record

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestClassify(t *testing.T) {
	for name, c := range map[string]struct {
		r    Record
		want string
	}{
		"image":                 {Record{Proto: "http", File: "images/vmlinuz", Outcome: "ok"}, KindImage},
		"disk image":            {Record{Proto: "http", File: "big.img", Outcome: "ok"}, KindImage},
		"old record no outcome": {Record{Proto: "http", File: "initrd.gz"}, KindImage},
		"generated config":      {Record{Proto: "tftp", File: "pxelinux.cfg/01-52-54-00-12-34-56", Kind: KindConfig, Outcome: "ok"}, KindConfig},
		"generated script":      {Record{Proto: "http", File: "boot.ipxe", Kind: KindConfig, Outcome: "ok"}, KindConfig},
		"script in the root":    {Record{Proto: "http", File: "boot.ipxe", Outcome: "ok"}, KindConfig},
		"grub.cfg":              {Record{Proto: "tftp", File: "grub/grub.cfg", Outcome: "ok"}, KindConfig},
		"u-boot script":         {Record{Proto: "tftp", File: "boot.scr.uimg", Outcome: "ok"}, KindConfig},
		"efi":                   {Record{Proto: "tftp", File: "ipxe.efi", Outcome: "ok"}, KindBoot},
		"kpxe":                  {Record{Proto: "tftp", File: "undionly.kpxe", Outcome: "ok"}, KindBoot},
		"pxelinux.0":            {Record{Proto: "tftp", File: "pxelinux.0", Outcome: "ok"}, KindBoot},
		"u-boot":                {Record{Proto: "tftp", File: "u-boot.bin", Outcome: "ok"}, KindBoot},
		"EFI upper case":        {Record{Proto: "http", File: "EFI/BOOT/BOOTX64.EFI", Outcome: "ok"}, KindBoot},
		"index probe":           {Record{Proto: "http", File: "", Outcome: "ok"}, KindAPI},
		"directory":             {Record{Proto: "http", File: "images/", Outcome: "ok"}, KindAPI},
		"api":                   {Record{Proto: "http", File: "api/fetches", Outcome: "ok"}, KindAPI},
		"not found":             {Record{Proto: "http", File: "vmlinuz", Outcome: "not-found"}, KindError},
		"404 on a script":       {Record{Proto: "http", File: "boot.ipxe", Kind: KindConfig, Outcome: "error"}, KindError},
		"aborted":               {Record{Proto: "http", File: "big.img", Outcome: "aborted"}, KindError},
		"tsize probe":           {Record{Proto: "tftp", File: "1a2b3c4d/start4.elf", Outcome: "aborted", TSize: true, Err: `after OACK: client sent error 8 "abort"`}, KindProbe},
		"aborted after data":    {Record{Proto: "tftp", File: "start4.elf", Outcome: "aborted", TSize: true, Bytes: 1024, Err: "replaced"}, KindError},
		"oack abort no tsize":   {Record{Proto: "tftp", File: "start4.elf", Outcome: "aborted", Err: "after OACK: gone"}, KindError},
		"pi overlay map":        {Record{Proto: "tftp", File: "1a2b3c4d/overlays/overlay_map.dtb", Outcome: "not-found"}, KindProbe},
		"denied":                {Record{Proto: "tftp", File: "../etc/passwd", Outcome: "denied"}, KindError},
		"iperf3 stream":         {Record{Proto: "tcp", File: "iperf3", Outcome: "ok"}, KindStream},
		// Lookups the loader expects to miss are probes, not errors.
		"pxelinux mac miss":     {Record{Proto: "tftp", File: "pxelinux.cfg/01-52-54-00-e2-b0-01", Outcome: "not-found"}, KindProbe},
		"pxelinux hex ip miss":  {Record{Proto: "tftp", File: "/boot/pxelinux.cfg/0A0002", Outcome: "not-found"}, KindProbe},
		"pxelinux uuid miss":    {Record{Proto: "tftp", File: "pxelinux.cfg/b8945908-d6a6-41a9-611d-74a6ab80b83d", Outcome: "not-found"}, KindProbe},
		"u-boot default-arch":   {Record{Proto: "tftp", File: "pxelinux.cfg/default-arm", Outcome: "not-found"}, KindProbe},
		"pxelinux default miss": {Record{Proto: "tftp", File: "pxelinux.cfg/default", Outcome: "not-found"}, KindProbe},
		"grub.cfg-mac miss":     {Record{Proto: "tftp", File: "grub/grub.cfg-01-52-54-00-12-34-56", Outcome: "not-found"}, KindProbe},
		"grub .lst miss":        {Record{Proto: "tftp", File: "grub/x86_64-efi/command.lst", Outcome: "not-found"}, KindProbe},
		"u-boot script miss":    {Record{Proto: "tftp", File: "boot.scr.uimg", Outcome: "not-found"}, KindProbe},
		"u-boot dtb probe":      {Record{Proto: "tftp", File: "dtb/", Outcome: "not-found"}, KindProbe},
		"u-boot dtb file":       {Record{Proto: "tftp", File: "dtb/rockchip/rk3399-rock-pi-4b.dtb", Outcome: "not-found"}, KindProbe},
		"shim sku probe":        {Record{Proto: "tftp", File: "revocations_sku.efi", Outcome: "not-found"}, KindProbe},
		"shim sbat probe":       {Record{Proto: "tftp", File: "/revocations_sbat.efi", Outcome: "not-found"}, KindProbe},
		"shim cert probe":       {Record{Proto: "tftp", File: "efi/shim_certificate_0.efi", Outcome: "not-found"}, KindProbe},
		"shim's grub miss":      {Record{Proto: "tftp", File: "grubx64.efi", Outcome: "not-found"}, KindError},
		// A missing plain grub.cfg, kernel or module is a failure; a
		// denied or broken config lookup too.
		"grub.cfg miss":         {Record{Proto: "tftp", File: "grub/grub.cfg", Outcome: "not-found"}, KindError},
		"grub module miss":      {Record{Proto: "tftp", File: "grub/x86_64-efi/normal.mod", Outcome: "not-found"}, KindError},
		"pxelinux include miss": {Record{Proto: "tftp", File: "pxelinux.cfg/menus/x.cfg", Outcome: "not-found"}, KindError},
		"pxelinux denied":       {Record{Proto: "tftp", File: "pxelinux.cfg/default", Outcome: "denied"}, KindError},
		"old error record":      {Record{Proto: "tftp", File: "pxelinux.cfg/C0A8", Kind: KindError, Outcome: "not-found"}, KindProbe},
		"udp stream":            {Record{Proto: "udp", File: "bench", Outcome: "ok"}, KindStream},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Classify(&c.r); got != c.want {
				t.Errorf("Classify(%+v) = %q, want %q", c.r, got, c.want)
			}
		})
	}
}

func TestParseKinds(t *testing.T) {
	for in, want := range map[string][]string{
		"": nil, "all": nil, "image": {KindImage}, "image, boot,image": {KindImage, KindBoot}, "Config": {KindConfig},
	} {
		got, err := ParseKinds(in)
		if err != nil {
			t.Fatalf("ParseKinds(%q): %v", in, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseKinds(%q) (-want +got):\n%s", in, diff)
		}
	}
	if _, err := ParseKinds("images"); err == nil {
		t.Error("ParseKinds(images): no error")
	}
}

func TestQueryKindsAndMinSize(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	for i, r := range []Record{
		{Proto: "http", File: "boot.ipxe", Kind: KindConfig, Bytes: 361, Size: 361, Outcome: "ok"},
		{Proto: "http", File: "vmlinuz", Bytes: 8 << 20, Size: 8 << 20, Outcome: "ok"},
		{Proto: "http", File: "initrd.img", Bytes: 64 << 10, Size: 64 << 10, Outcome: "ok"},
		{Proto: "tftp", File: "ipxe.efi", Bytes: 1 << 20, Size: 1 << 20, Outcome: "ok"},
		{Proto: "http", File: "", Outcome: "not-found"},
		{Proto: "tftp", File: "pxelinux.cfg/C0A8", Outcome: "not-found"},
	} {
		r.Time, r.Source, r.Direction = time.Unix(int64(i+1), 0), "serve", "rx"
		if _, err := s.Add(ctx, &r, nil); err != nil {
			t.Fatal(err)
		}
	}
	// An older pxeperf's record: no kind until classified.
	if _, err := s.db.Exec(`UPDATE records SET kind = '' WHERE file = 'initrd.img'`); err != nil {
		t.Fatal(err)
	}
	// And one from before probes had a kind: its missed lookup says error.
	if _, err := s.db.Exec(`UPDATE records SET kind = 'error' WHERE file = 'pxelinux.cfg/C0A8'`); err != nil {
		t.Fatal(err)
	}
	files := func(st *Store, f Filter) []string {
		t.Helper()
		rs, err := st.Query(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.File+":"+r.Kind)
		}
		return out
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for name, c := range map[string]struct {
		f    Filter
		want []string
	}{
		"all":            {Filter{}, []string{"boot.ipxe:config", "vmlinuz:image", "initrd.img:image", "ipxe.efi:boot", ":error", "pxelinux.cfg/C0A8:probe"}},
		"images":         {Filter{Kinds: []string{KindImage}}, []string{"vmlinuz:image", "initrd.img:image"}},
		"boot and error": {Filter{Kinds: []string{KindBoot, KindError}}, []string{"ipxe.efi:boot", ":error"}},
		"probes":         {Filter{Kinds: []string{KindProbe}}, []string{"pxelinux.cfg/C0A8:probe"}},
		"min size":       {Filter{MinSize: 100 << 10}, []string{"vmlinuz:image", "ipxe.efi:boot"}},
		"images, large":  {Filter{Kinds: []string{KindImage}, MinSize: 1 << 20}, []string{"vmlinuz:image"}},
	} {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(c.want, files(ro, c.f)); d != "" {
				t.Errorf("read-only store (-want +got):\n%s", d)
			}
		})
	}
	s.Close()
	// A read-write open classifies the old record in the file.
	s = openTest(t, dir)
	var kind string
	if err := s.db.QueryRow(`SELECT kind FROM records WHERE file = 'initrd.img'`).Scan(&kind); err != nil || kind != KindImage {
		t.Errorf("kind after a read-write open = %q, %v; want image", kind, err)
	}
	if err := s.db.QueryRow(`SELECT kind FROM records WHERE file = 'pxelinux.cfg/C0A8'`).Scan(&kind); err != nil || kind != KindProbe {
		t.Errorf("kind of the old probe after a read-write open = %q, %v; want probe", kind, err)
	}
}
