package main

import "github.com/spf13/cobra"

// newImagesCmd is `pxeperf images`. Owned by the images work.
func newImagesCmd() *cobra.Command {
	return &cobra.Command{Use: "images", Short: "List, generate and verify boot images"}
}
