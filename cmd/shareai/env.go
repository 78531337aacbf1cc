package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/shareai/shareai/internal/config"
)

func bindEnv(fs *flag.FlagSet) error { return config.Bind(fs, os.Getenv) }

// parseFile is parse for a program configured by a flat YAML file of its flags (--config, or
// SHAREAI_CONFIG): the file's settings become the flags' defaults, which the environment and
// then the command line override.
func parseFile(fs *flag.FlagSet, args []string, stderr io.Writer, about string) error {
	if err := config.LoadFlagFile(fs, config.ConfigPath(args, os.Getenv)); err != nil {
		return err
	}
	return parse(fs, args, stderr, about)
}

// checkFlag registers --check-config.
func checkFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("check-config", false, "check the settings (file, environment, flags), print them with secrets masked, and exit without starting")
}

// printSettings ends a --check-config run, once the settings are checked: it prints them as
// the configuration file would hold them.
func printSettings(w io.Writer, fs *flag.FlagSet) error {
	fmt.Fprintf(w, "# shareai %s: the settings are valid. Secrets are masked.\n", fs.Name())
	return config.WriteSettings(w, fs)
}
