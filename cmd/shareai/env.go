package main

import (
	"flag"
	"os"

	"github.com/shareai/shareai/internal/config"
)

func bindEnv(fs *flag.FlagSet) error { return config.Bind(fs, os.Getenv) }
