package testenv_test

import (
	"context"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// The Redis a test gets persists nothing, listens on 127.0.0.1 only, and
// is gone when the test ends.
func TestRedis(t *testing.T) {
	ctx := context.Background()
	var url string
	t.Run("running", func(t *testing.T) {
		url = testenv.Redis(t)
		client := testenv.RedisClient(t, url)
		want := map[string]string{"save": "", "appendonly": "no", "bind": "127.0.0.1"}
		for param, v := range want {
			got, err := client.ConfigGet(ctx, param).Result()
			if err != nil || got[param] != v {
				t.Errorf("CONFIG GET %s = %v, %v; want %q", param, got, err, v)
			}
		}
	})
	if url == "" {
		t.Skip("no redis-server")
	}
	if err := testenv.RedisClient(t, url).Ping(ctx).Err(); err == nil {
		t.Errorf("redis-server at %s still answers after its test ended", url)
	}
}
