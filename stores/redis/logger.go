package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// go-redis logs dial failures and pool events to stderr through a package-level logger.
// Library code must not print: the errors reach the caller anyway, classified. The
// logger is go-redis's global, so it is silenced once, by the first Open.
var silenceOnce sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

func silenceDriverLog() { silenceOnce.Do(func() { goredis.SetLogger(discardLogger{}) }) }
