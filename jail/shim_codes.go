package jail

// Exit codes of `legion jail-shim` the runtime branches on.
const (
	// ShimExitPermanent: the command cannot run (no such file, exec format
	// error, no such user); waiting will not help.
	ShimExitPermanent = 127
	// ShimExitFailed: the supervisor could not set the container up.
	ShimExitFailed = 125
)
