// Command tokenin runs multi-turn tool-calling rollouts through a worker
// on the embedded Temporal server (the interception, the built-in agent)
// against the vLLM-shaped test upstream serving each family's real chat
// template and tokenizer, with --token-in and without (the baseline), in
// the same run, and prints what a trainer gets of each as a markdown
// table: prefix breaks, rollouts that are one interleavable sample, the
// turns sent as tokens or as text (and why), samples whose ids read back
// as the conversation, samples masked on exactly the sampled tokens.
//
//	go run ./bench/cmd/tokenin                       # 64 rollouts a family and mode
//	go run ./bench/cmd/tokenin -rollouts 8 -families qwen3 -json out.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"github.com/evalflow/evalflow/bench/internal/orchestration"
	"github.com/evalflow/evalflow/bench/internal/tokenin"
	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
	"github.com/evalflow/evalflow/internal/harness/agent"
)

func main() {
	agent.ServeIfAsked() // the workers run this binary as the built-in agent
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tokenin:", err)
		os.Exit(1)
	}
}

func run(args []string, out, log io.Writer) error {
	fs := flag.NewFlagSet("tokenin", flag.ContinueOnError)
	rollouts := fs.Int("rollouts", 64, "rollouts per family and mode")
	names := fs.String("families", strings.Join(chattemplate.Names(), ","), "comma-separated families")
	jsonOut := fs.String("json", "", "also write the figures to this file as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "evalflow-tokenin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := orchestration.StartServer(ctx, filepath.Join(dir, "temporal"))
	if err != nil {
		return err
	}
	defer srv.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var figs []tokenin.Figures
	for i, name := range strings.Split(*names, ",") {
		f, err := chattemplate.ForModel(name)
		if err != nil || f.Name != name {
			return fmt.Errorf("family %q: want one of %s", name, strings.Join(chattemplate.Names(), ", "))
		}
		fmt.Fprintf(log, "%s: %d rollouts with token-in and without …\n", f.Name, *rollouts)
		got, err := family(ctx, srv, f, filepath.Join(dir, "runs-"+f.Name), self, *rollouts, i%2 == 1)
		figs = append(figs, got...)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	writeTable(out, figs)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(figs, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// family runs f's rollouts with and without token-in (textFirst: the
// baseline first), on an upstream and a worker of its own.
func family(ctx context.Context, srv *orchestration.Server, f chattemplate.Family, runsDir, self string, rollouts int, textFirst bool) ([]tokenin.Figures, error) {
	up, err := vllmtest.Run(vllmtest.Config{Family: f, Script: tokenin.Script(f)})
	if up != nil {
		defer up.Close()
	}
	if err != nil {
		if up != nil {
			err = fmt.Errorf("%w\n%s", err, up.Log())
		}
		return nil, err
	}
	queue := "tokenin-" + f.Name
	w, err := tokenin.StartWorker(srv.Client, queue, up, runsDir, []string{self, agent.Subcommand})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	modes := []bool{true, false}
	if textFirst {
		slices.Reverse(modes)
	}
	figs := make([]tokenin.Figures, 2)
	for _, on := range modes {
		cfg := tokenin.Config{Queue: queue, RunID: fmt.Sprintf("%s-token-in-%t", f.Name, on), Upstream: up, Family: f,
			RunsDir: runsDir, Rollouts: rollouts, TokenIn: on}
		fig, err := tokenin.Run(ctx, srv.Client, cfg)
		if err != nil {
			return nil, err
		}
		figs[map[bool]int{true: 0, false: 1}[on]] = fig
	}
	return figs, nil
}

func writeTable(w io.Writer, figs []tokenin.Figures) {
	fmt.Fprintf(w, "| family | token-in | rollouts (failed) | turns | as tokens | as text, why | prefix breaks | one interleavable sample | samples | read back as the conversation | mask 1 on exactly the sampled tokens |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, f := range figs {
		var why []string
		for _, k := range slices.Sorted(maps.Keys(f.AsText)) {
			why = append(why, fmt.Sprintf("%d %s", f.AsText[k], k))
		}
		fmt.Fprintf(w, "| %s | %s | %d (%d) | %d | %d | %s | %d | %d | %d | %d | %d |\n",
			f.Family, map[bool]string{true: "on", false: "off"}[f.TokenIn], f.Rollouts, f.Failed, f.Turns, f.AsTokens,
			strings.Join(why, "; "), f.PrefixBreaks, f.OneSample, f.Samples, f.Detokenized, f.Masked)
	}
	for _, f := range figs {
		for _, p := range f.Problems {
			fmt.Fprintf(w, "\n%s, token-in %t: %s", f.Family, f.TokenIn, p)
		}
	}
	fmt.Fprintln(w)
}
