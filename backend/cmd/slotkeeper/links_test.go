package main

import "testing"

func TestProviderLinksDropTheAPIPath(t *testing.T) {
	l := providerLinks("https://coolify.example/api/v1/", "https://bitbucket.example/")
	if l.Coolify != "https://coolify.example" || l.Bitbucket != "https://bitbucket.example" {
		t.Fatalf("links: %+v", l)
	}
	if l := providerLinks("", ""); l.Coolify != "" || l.Bitbucket != "" {
		t.Fatalf("no providers: %+v", l)
	}
}
