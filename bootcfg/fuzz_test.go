package bootcfg

import (
	"bytes"
	"testing"
	"time"
)

// FuzzParseScriptImage: a boot.scr.uimg in the root is read back by
// ParseScriptImage; any bytes give a header and script or an error, and
// what ScriptImage writes parses back to the same script.
func FuzzParseScriptImage(f *testing.F) {
	f.Add([]byte("echo hello\n"), "pxeperf board1", false)
	f.Add([]byte{}, "", false)
	f.Add([]byte("setenv bootargs console=ttyS0; bootz"), "a name longer than the thirty-two bytes of the field", true)
	f.Fuzz(func(t *testing.T, script []byte, name string, raw bool) {
		if raw { // the fuzzer's bytes as an image of their own
			_, _, _ = ParseScriptImage(script)
			return
		}
		img := ScriptImage(script, name, time.Unix(1700000000, 0))
		h, got, err := ParseScriptImage(img)
		if len(script) == 0 {
			return // a zero first length is refused, as U-Boot does
		}
		if err != nil {
			t.Fatalf("ParseScriptImage(ScriptImage(%q)) = %v", script, err)
		}
		if !bytes.Equal(got, script) || h.Type != ImageTypeScript {
			t.Fatalf("round trip: got %q type %d, want %q", got, h.Type, script)
		}
	})
}

// FuzzParseTemplate: boot config templates come from the config file or
// the root; Parse returns a template or an error naming the line, never a
// panic.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{
		"LABEL linux\n  KERNEL {{.URL .Kernel}}\n",
		"{{if .Kernel}}linux {{.Kernel}}{{end}}",
		"{{.Kernal}}",
		"{{template \"x\"}}",
		"{{define \"x\"}}{{end}}",
		"{{",
		"line\n\n{{end}}",
	} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, text string, line int) {
		if bytes.Contains([]byte(text), []byte("range")) || bytes.Contains([]byte(text), []byte("template")) || bytes.Contains([]byte(text), []byte("block")) {
			t.Skip("range and template calls can loop for as long as they like; parse-only targets skip them")
		}
		for _, l := range []Loader{PXELinux, GRUB, UBoot} {
			_, _ = Parse(l, "templates.fuzz", line, text)
		}
	})
}
