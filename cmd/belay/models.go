package main

import (
	"context"
	"fmt"

	"github.com/belayrun/belay/config"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/anthropic"
	"github.com/belayrun/belay/model/openai"
)

// buildModel makes the model a configuration file names. API keys come from
// the providers' usual variables (ANTHROPIC_API_KEY, OPENAI_API_KEY) and
// never from the file.
func buildModel(ctx context.Context, m config.Model) (model.Model, error) {
	switch m.Provider {
	case "anthropic":
		return anthropic.New(anthropic.Config{Model: m.Name, BaseURL: m.BaseURL, MaxRetries: m.MaxRetries, Timeout: m.Timeout.D})
	case "openai":
		return openai.New(openai.Config{Model: m.Name, BaseURL: m.BaseURL, MaxRetries: m.MaxRetries, Timeout: m.Timeout.D})
	}
	return nil, fmt.Errorf("unknown provider %q", m.Provider)
}
