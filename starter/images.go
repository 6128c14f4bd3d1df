package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container"
)

// imagesCommand lists, and prunes, the images the container runtime built
// from tasks' Dockerfiles on the engine at DOCKER_HOST.
func imagesCommand() *cli.Command {
	return &cli.Command{
		Name:      "images",
		Usage:     "list the images built for tasks on the container engine (DOCKER_HOST), and what its build cache holds",
		ArgsUsage: " ",
		Action: func(cctx *cli.Context) error {
			r, err := imagesRuntime(cctx.Context)
			if err != nil {
				return err
			}
			imgs, err := r.TaskImages(cctx.Context)
			if err != nil {
				return err
			}
			var total int64
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "image\tsize\tbuilt\tin use")
			for _, img := range imgs {
				total += img.Size
				fmt.Fprintf(tw, "%s\t%s\t%s ago\t%v\n", img.Name, megabytes(img.Size), time.Since(img.Created).Round(time.Minute), img.InUse)
			}
			tw.Flush()
			fmt.Printf("%d task images, %s (each counts the layers it shares with its base image)\n", len(imgs), megabytes(total))
			if du, err := r.Engine.DiskUsage(cctx.Context); err == nil {
				fmt.Printf("the engine's build cache holds %s in %d entries; all its image layers %s\n", megabytes(du.BuildCacheSize()), len(du.BuildCache), megabytes(du.LayersSize))
			}
			return nil
		},
		Subcommands: []*cli.Command{{
			Name:      "prune",
			Usage:     "remove task images: those beyond the --keep most recent, and with --older-than those built longer ago; never one in use",
			ArgsUsage: " ",
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "keep", Value: 0, Usage: "how many of the most recently built to keep"},
				&cli.DurationFlag{Name: "older-than", Usage: "also remove those built longer ago than this (e.g. 168h); images built within a day are kept unless this is shorter"},
			},
			Action: func(cctx *cli.Context) error {
				r, err := imagesRuntime(cctx.Context)
				if err != nil {
					return err
				}
				removed, err := r.PruneImages(cctx.Context, cctx.Int("keep"), cctx.Duration("older-than"))
				var freed int64
				for _, img := range removed {
					freed += img.Size
					fmt.Printf("removed %s (%s)\n", img.Name, megabytes(img.Size))
				}
				fmt.Printf("%d task images removed, up to %s freed\n", len(removed), megabytes(freed))
				return err
			},
		}},
	}
}

// imagesRuntime is a container runtime on DOCKER_HOST's engine, for its
// images only.
func imagesRuntime(ctx context.Context) (*container.Runtime, error) {
	eng, err := engine.FromEnv()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := eng.Version(ctx); err != nil {
		return nil, fmt.Errorf("no container engine answers at %s (set DOCKER_HOST, or run make engine): %w", eng.Host(), err)
	}
	return &container.Runtime{Engine: eng}, nil
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
