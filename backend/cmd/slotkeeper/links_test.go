package main

import "testing"

func TestProviderLinksDropTheAPIPath(t *testing.T) {
	l := linksOf(Config{CoolifyURL: "https://coolify.example/api/v1/", BitbucketURL: "https://bitbucket.example/"}, world{})
	if l.Coolify != "https://coolify.example" || l.Bitbucket != "https://bitbucket.example" {
		t.Fatalf("links: %+v", l)
	}
	if l := linksOf(Config{}, world{}); l.Coolify != "" || l.Bitbucket != "" {
		t.Fatalf("no providers: %+v", l)
	}
}
