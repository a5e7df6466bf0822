// Command testplugin is a credential provider plugin for tests: it answers
// a CredentialProviderRequest with the credentials in its environment.
//
//	TEST_PLUGIN_USER, TEST_PLUGIN_PASSWORD  the credentials
//	TEST_PLUGIN_AUTH_KEY                    the auth key (default: the image's registry)
//	TEST_PLUGIN_CACHE_KEY_TYPE              Image, Registry or Global (default Registry)
//	TEST_PLUGIN_CACHE_DURATION              a duration, or absent
//	TEST_PLUGIN_LOG                         a file each request's image (and args) is appended to
//	TEST_PLUGIN_FAIL                        exit 1 with this on stderr
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	var req struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Image      string `json:"image"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil || req.Kind != "CredentialProviderRequest" {
		fmt.Fprintln(os.Stderr, "bad request:", err, req.Kind)
		os.Exit(2)
	}
	if log := os.Getenv("TEST_PLUGIN_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, req.Image, strings.Join(os.Args[1:], " "))
			f.Close()
		}
	}
	if msg := os.Getenv("TEST_PLUGIN_FAIL"); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
	key := os.Getenv("TEST_PLUGIN_AUTH_KEY")
	if key == "" {
		key, _, _ = strings.Cut(req.Image, "/")
	}
	keyType := os.Getenv("TEST_PLUGIN_CACHE_KEY_TYPE")
	if keyType == "" {
		keyType = "Registry"
	}
	resp := map[string]any{
		"apiVersion":   req.APIVersion,
		"kind":         "CredentialProviderResponse",
		"cacheKeyType": keyType,
		"auth": map[string]any{key: map[string]string{
			"username": os.Getenv("TEST_PLUGIN_USER"),
			"password": os.Getenv("TEST_PLUGIN_PASSWORD"),
		}},
	}
	if d := os.Getenv("TEST_PLUGIN_CACHE_DURATION"); d != "" {
		resp["cacheDuration"] = d
	}
	_ = json.NewEncoder(os.Stdout).Encode(resp)
}
