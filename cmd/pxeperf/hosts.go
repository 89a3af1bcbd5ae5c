package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// hostsFlags locate the admin listener for `pxeperf hosts ...`.
type hostsFlags struct {
	config, admin, token, tokenFile string
	json                            bool
}

func newHostsCmd() *cobra.Command {
	f := &hostsFlags{}
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "List and change a running serve's hosts and next boots (the REST API of /api/hosts)",
		Long: `Talk to a running pxeperf serve's host API on its admin listener: list the
host entries (from the config and set at run time), set or remove one, say
what a board boots next (once, or until cleared), and wait until it has
fetched that kernel. Changes take effect at once and survive a restart.

The admin listener is --admin URL (default: admin.listen of the config),
its token --token T, --token-file FILE or $PXEPERF_TOKEN (default:
admin.token_file of the config). --json prints the API's answers.

` + exitStatusText,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.config, "config", "", "config file whose admin section names the listener and token; default: ./pxeperf.yaml, then /etc/pxeperf/pxeperf.yaml")
	pf.StringVar(&f.admin, "admin", "", "serve's admin listener, http://HOST:PORT or HOST:PORT (default: admin.listen of the config)")
	pf.StringVar(&f.token, "token", "", "the admin token (default: $PXEPERF_TOKEN, else admin.token_file of the config)")
	pf.StringVar(&f.tokenFile, "token-file", "", "file holding the admin token")
	pf.BoolVar(&f.json, "json", false, "print JSON")
	cmd.AddCommand(newHostsListCmd(f), newHostsShowCmd(f), newHostsRmCmd(f), newHostsSetCmd(f), newHostsNextBootCmd(f),
		newHostsWaitCmd(f))
	return cmd
}

// hostsAPI is a client of serve's host and record API.
type hostsAPI struct {
	base, token string
	hc          *http.Client
	out         io.Writer
	json        bool
}

// newHostsAPI resolves the admin URL and token: flags first, then
// $PXEPERF_TOKEN, then the config (read only when a flag leaves
// something to it).
func newHostsAPI(cmd *cobra.Command, f *hostsFlags) (*hostsAPI, error) {
	addr, token := f.admin, f.token
	if token == "" && f.tokenFile != "" {
		t, err := readToken(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = t
	}
	if token == "" {
		token = os.Getenv("PXEPERF_TOKEN")
	}
	if addr == "" || token == "" {
		cfg, err := loadConfig(f.config)
		if err != nil {
			return nil, err
		}
		if addr == "" {
			if addr = cfg.Admin.Listen; addr == "off" {
				return nil, usageErrorf("the admin listener is off (admin.listen: off): name one with --admin URL")
			}
		}
		if token == "" && cfg.Admin.TokenFile != "" {
			if token, err = readToken(cfg.Admin.TokenFile); err != nil {
				return nil, err
			}
		}
	}
	base, err := adminBase(addr)
	if err != nil {
		return nil, err
	}
	return &hostsAPI{base: base, token: token, hc: &http.Client{Timeout: 15 * time.Second}, out: cmd.OutOrStdout(), json: f.json}, nil
}

// adminBase is the admin listener's base URL from --admin: a URL, or
// HOST:PORT (":9069" is the local host).
func adminBase(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageErrorf("--admin %q: want http://HOST:PORT or HOST:PORT, e.g. --admin http://127.0.0.1:9069", addr)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// apiError is an answer other than 2xx, with the API's error, field and
// fix when it sent them.
type apiError struct {
	Method, Path string
	Status       int
	Msg          string `json:"error"`
	Field        string `json:"field"`
	Fix          string `json:"fix"`
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%s %s: HTTP %d", e.Method, e.Path, e.Status)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Field != "" && !strings.Contains(e.Msg, e.Field) {
		s += " (field " + e.Field + ")"
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// statusOf is err's HTTP status, 0 when it is no API answer.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// cliError gives an API error its exit code: what was sent does not
// validate (400, 413, 415): 2, fix the command line; else 1.
func cliError(err error) error {
	switch statusOf(err) {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return usageError(err)
	}
	return err
}

// do sends one request (body as JSON when not nil) and returns the
// answer's body and headers; an answer other than 2xx is an *apiError.
func (c *hostsAPI) do(ctx context.Context, method, path string, hdr http.Header, body any) ([]byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, usageErrorf("--admin %q: %v", c.base, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("reaching serve's admin listener at %s: %w (is pxeperf serve running? set --admin)", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{Method: method, Path: path, Status: resp.StatusCode}
		if json.Unmarshal(b, ae) != nil || ae.Msg == "" {
			ae.Msg = strings.TrimSpace(string(b[:min(len(b), 300)]))
		}
		if resp.StatusCode == http.StatusUnauthorized && ae.Fix == "" {
			ae.Fix = "give the admin token: --token, --token-file or $PXEPERF_TOKEN"
		}
		return b, resp.Header, ae
	}
	return b, resp.Header, nil
}

// getJSON decodes GET path's answer into v.
func (c *hostsAPI) getJSON(ctx context.Context, path string, v any) error {
	_, err := c.get(ctx, path, v, false)
	return err
}

// read is GET path: with --json its answer is printed (printed true),
// else decoded into v.
func (c *hostsAPI) read(ctx context.Context, path string, v any) (printed bool, err error) {
	return c.get(ctx, path, v, c.json)
}

// get is GET path, its answer printed as it is (print) or decoded into v.
func (c *hostsAPI) get(ctx context.Context, path string, v any, print bool) (printed bool, err error) {
	b, _, err := c.do(ctx, http.MethodGet, path, nil, nil)
	switch {
	case err != nil:
		return false, err
	case print:
		return true, c.printJSON(b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("GET %s: the answer is not the JSON expected: %w", path, err)
	}
	return false, nil
}

// printJSON writes an answer's JSON indented.
func (c *hostsAPI) printJSON(b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		buf.Reset()
		buf.Write(b)
	}
	buf.WriteByte('\n')
	_, err := c.out.Write(buf.Bytes())
	return err
}

// macArg reads the MAC argument in any common form, as the API writes
// it (52:54:00:12:34:56).
func macArg(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", usageErrorf("MAC %q: want a MAC address, e.g. 52:54:00:12:34:56", s)
	}
	return hw.String(), nil
}

// hostPath is the API path of a host entry.
func hostPath(mac string, rest ...string) string {
	return "/api/hosts/" + url.PathEscape(mac) + strings.Join(rest, "")
}

// hostsRun wraps a host subcommand: it reads the MAC argument (when the
// command takes one), builds the client and gives API errors their exit
// codes.
func hostsRun(f *hostsFlags, fn func(ctx context.Context, c *hostsAPI, mac string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		var mac string
		if len(args) > 0 {
			m, err := macArg(args[0])
			if err != nil {
				return err
			}
			mac = m
		}
		c, err := newHostsAPI(cmd, f)
		if err != nil {
			return err
		}
		return cliError(fn(cmd.Context(), c, mac))
	}
}
