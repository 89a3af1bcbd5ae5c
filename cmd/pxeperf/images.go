package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/images"
	"github.com/spf13/cobra"
)

// imagesFlags are the flags shared by the `pxeperf images` commands.
type imagesFlags struct {
	config, root string
}

// newImagesCmd is `pxeperf images`: list, generate and verify.
func newImagesCmd() *cobra.Command {
	f := &imagesFlags{}
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List, generate and verify boot images",
		Long: `Inspect the folder pxeperf serves.

  pxeperf images list                         every served file with size and sha256
  pxeperf images generate big.img --size 1GiB test image for throughput runs
  pxeperf images verify                       check files against their .sha256 sidecars

NAME.zst and NAME.gz are served as NAME, decompressed; iPXE binaries missing
from the root are served from ` + images.DefaultFallbackDir + ` (Debian's ipxe package).
The folder is --root, else the root of the config serve reads (--config,
./pxeperf.yaml, /etc/pxeperf/pxeperf.yaml; the default's is ./images).`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.root, "root", "", "image folder (default: the config's root, as serve's; ./images)")
	pf.StringVar(&f.config, "config", "", "config file whose root to use; default: ./pxeperf.yaml, then "+
		"/etc/pxeperf/pxeperf.yaml, else the embedded default")
	_ = cmd.MarkPersistentFlagDirname("root")
	_ = cmd.MarkPersistentFlagFilename("config", "yaml", "yml")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return f.resolve(cmd) }
	cmd.AddCommand(newImagesListCmd(f), newImagesGenerateCmd(f), newImagesVerifyCmd(f))
	return cmd
}

// resolve sets the root from the config when --root is not given.
func (f *imagesFlags) resolve(cmd *cobra.Command) error {
	if cmd.Flags().Changed("root") {
		return nil
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	f.root = cfg.Root
	return nil
}

func (f *imagesFlags) open() (*images.Store, error) {
	// No cache folder: list and verify decompress on the fly and leave no
	// files behind.
	return images.Open(f.root, "", slog.New(slog.DiscardHandler))
}

func newImagesListCmd(f *imagesFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List served files with size and sha256 (compressed ones also unpacked)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			defer s.Close()
			entries, err := s.List()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBYTES\tSIZE\tSHA256\tNOTE")
			var bad []string
			for _, e := range entries {
				note := ""
				switch e.Kind {
				case "compressed":
					note = "compressed"
				case "unpacked":
					note = "served unpacked from " + e.From
				case "fallback":
					note = "fallback: " + e.From
				}
				if e.Err != nil {
					bad = append(bad, e.Name)
					fmt.Fprintf(tw, "%s\t-\t-\t-\tERROR: %v\n", e.Name, e.Err)
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", e.Name, e.Size, images.FormatSize(e.Size), e.SHA256, note)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(bad) > 0 {
				return fmt.Errorf("%d file(s) in %s could not be read: %s", len(bad), f.root, strings.Join(bad, ", "))
			}
			return nil
		},
	}
}

func newImagesGenerateCmd(f *imagesFlags) *cobra.Command {
	var size string
	var seed uint64
	var force bool
	cmd := &cobra.Command{
		Use:   "generate NAME --size SIZE [--seed N] [--force]",
		Short: "Write a deterministic pseudo-random test image and its .sha256 sidecar",
		Long: `Write ROOT/NAME with SIZE pseudo-random bytes and ROOT/NAME.sha256.

The same NAME, SIZE and --seed give the same bytes on any machine, so two labs
can compare throughput on identical images. The data does not compress.
SIZE: bytes (1000000) or a unit: 64M, 500MiB, 1GiB, 1.5GiB (powers of 1024),
500MB (powers of 1000). An existing NAME is replaced only with --force.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if size == "" {
				return usageErrorf("--size is required, e.g. --size 500MiB")
			}
			n, err := configs.ParseSize(size)
			if err != nil {
				return usageErrorf("--size: %w", err)
			}
			root, err := folderFor("root", "--root", f.root)
			if err != nil {
				return err
			}
			if name, err := images.Clean(args[0]); err == nil && !force {
				if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err == nil {
					return fmt.Errorf("%s already exists (%s); add --force to replace it, or pick another name",
						filepath.Join(root, filepath.FromSlash(name)), images.FormatSize(st.Size()))
				}
			}
			start := time.Now()
			sum, err := images.GenerateFile(f.root, args[0], n, seed)
			if err != nil {
				return err
			}
			took := time.Since(start)
			fmt.Fprintf(cmd.OutOrStdout(), "%s  %s/%s  %d bytes (%s) seed %d in %s (%.0f MB/s)\n",
				sum, strings.TrimSuffix(f.root, "/"), args[0], n, images.FormatSize(n), seed,
				took.Round(time.Millisecond), float64(n)/1e6/max(took.Seconds(), 1e-9))
			return nil
		},
	}
	cmd.Flags().StringVar(&size, "size", "", "image size: 1000000, 64M, 500MiB, 1GiB, 500MB (required)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "generator seed; same name+size+seed gives the same bytes")
	cmd.Flags().BoolVar(&force, "force", false, "replace NAME (and its .sha256) when it exists")
	return cmd
}

func newImagesVerifyCmd(f *imagesFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "verify [NAME...]",
		Short: "Check images against their .sha256 sidecars (decompressing .zst/.gz)",
		Long: `Check images against their .sha256 sidecars.

With no NAME every sidecar in the root is checked: NAME.sha256 checks NAME, or
NAME.zst / NAME.gz decompressed when only those exist. Exits non-zero naming
every image that is missing, unreadable or different.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			defer s.Close()
			checks, err := s.Verify(args...)
			if err != nil {
				return err
			}
			if len(checks) == 0 {
				return fmt.Errorf("no .sha256 sidecars in %s: nothing to verify (write them with sha256sum or `pxeperf images generate`)", f.root)
			}
			out := cmd.OutOrStdout()
			var bad []string
			for _, c := range checks {
				via := ""
				if c.From != "" {
					via = " (from " + c.From + ")"
				}
				switch {
				case errors.Is(c.Err, images.ErrMismatch):
					bad = append(bad, c.Name)
					fmt.Fprintf(out, "BAD   %s%s: sha256 %s, %s says %s\n", c.Name, via, c.Got, c.Sidecar, c.Want)
				case c.Err != nil:
					bad = append(bad, c.Name)
					fmt.Fprintf(out, "ERROR %s%s: %v\n", c.Name, via, c.Err)
				default:
					fmt.Fprintf(out, "OK    %s%s %s\n", c.Name, via, strconv.FormatInt(c.Size, 10)+" bytes")
				}
			}
			if len(bad) > 0 {
				return fmt.Errorf("%d of %d image(s) failed verification: %s", len(bad), len(checks), strings.Join(bad, ", "))
			}
			return nil
		},
	}
}
