package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pxeperf/pxeperf/configs"
	"github.com/pxeperf/pxeperf/record"
	"github.com/spf13/cobra"
)

// openStore opens the config's record store (store.url, else the data
// folder's SQLite file) for writing. A PostgreSQL database that is away
// gives a store and an error wrapping record.ErrUnreachable.
func openStore(cfg *configs.Config) (*record.Store, error) {
	loc, err := record.ParseLocation(cfg.Store.URL, cfg.Data)
	if err != nil {
		return nil, err
	}
	return record.OpenURL(context.Background(), loc)
}

// openStoreReadOnly opens a store URL ("" is dataDir's SQLite file) for
// reading.
func openStoreReadOnly(ctx context.Context, url, dataDir string) (*record.Store, error) {
	loc, err := record.ParseLocation(url, dataDir)
	if err != nil {
		return nil, err
	}
	return record.OpenURLReadOnly(ctx, loc)
}

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Create, upgrade or move the record store (SQLite or PostgreSQL)",
		Long: `Manage the record store.

  pxeperf store migrate --store postgres://pxeperf@db.lab/pxeperf
  pxeperf store copy --from sqlite:./pxeperf-data --to postgres://pxeperf@db.lab/pxeperf

serve migrates its store at start too; migrate is for a database prepared
before any server runs (or by a user with more rights). A store written by a
newer pxeperf is refused, never downgraded. copy keeps every record's uid:
run it again after an interruption and it adds only what is missing.`,
	}
	cmd.AddCommand(newStoreMigrateCmd(), newStoreCopyCmd())
	return cmd
}

func newStoreMigrateCmd() *cobra.Command {
	var store, data, config string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the store's schema (--store, else store.url, else <data>/pxeperf.db)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loc, err := storeLocation(cmd, config, store, data)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			v, err := record.Migrate(ctx, loc)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: schema version %d\n", loc, v)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&store, "store", "", "store: postgres://USER@HOST/DB or sqlite:PATH (default: the config's store.url, else <data>/pxeperf.db)")
	fl.StringVar(&data, "data", "", "data folder of the default SQLite store (default: the config's data)")
	addConfigFlag(cmd, &config)
	return cmd
}

func newStoreCopyCmd() *cobra.Command {
	var from, to string
	var batch int
	cmd := &cobra.Command{
		Use:   "copy --from STORE --to STORE",
		Short: "Copy every record and lease from one store to another (idempotent: by uid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return usageErrorf("give both --from and --to, e.g. --from sqlite:./pxeperf-data --to postgres://pxeperf@db.lab/pxeperf")
			}
			if batch < 1 {
				return usageErrorf("--batch %d: want a count of records, e.g. 1000", batch)
			}
			src, err := record.ParseLocation(from, "")
			if err != nil {
				return usageErrorf("--from: %w", err)
			}
			dst, err := record.ParseLocation(to, "")
			if err != nil {
				return usageErrorf("--to: %w", err)
			}
			if src == dst {
				return usageErrorf("--from and --to name the same store")
			}
			ctx := cmd.Context()
			in, err := record.OpenURLReadOnly(ctx, src)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := record.OpenURL(ctx, dst)
			if err != nil {
				if out != nil {
					out.Close()
				}
				return err
			}
			defer out.Close()
			start := time.Now()
			st, err := record.Copy(ctx, in, out, batch, nil)
			if err != nil {
				return fmt.Errorf("copy stopped after %d records (run it again: what is copied is skipped): %w", st.Records, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "copied %d records and %d leases from %s to %s in %s (already there: skipped)\n",
				st.Records, st.Leases, src, dst, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "source store: sqlite:PATH (a data folder or its pxeperf.db) or postgres://...")
	fl.StringVar(&to, "to", "", "target store: postgres://USER@HOST/DB or sqlite:PATH (created or migrated)")
	fl.IntVar(&batch, "batch", 1000, "records per transaction")
	return cmd
}

// storeLocation is --store when given, else the config's store.url (over
// --data, else the config's data folder).
func storeLocation(cmd *cobra.Command, config, store, data string) (record.Location, error) {
	set := cmd.Flags().Changed
	if set("store") {
		loc, err := record.ParseLocation(store, data)
		if err != nil {
			return loc, usageErrorf("--store: %w", err)
		}
		return loc, nil
	}
	cfg, err := loadConfig(config)
	if err != nil {
		return record.Location{}, err
	}
	if set("data") {
		// An explicit data folder means its own SQLite store.
		return record.Location{Kind: record.SQLite, Dir: data}, nil
	}
	loc, err := record.ParseLocation(cfg.Store.URL, cfg.Data)
	if err != nil {
		return loc, fmt.Errorf("store.url in %s: %w", configName(cfg), err)
	}
	return loc, nil
}
