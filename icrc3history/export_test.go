package icrc3history

// SetAfterPageReply makes f run between each page reply and its decoding
// until the returned restore is called.
func SetAfterPageReply(f func()) (restore func()) {
	prev := afterPageReply
	afterPageReply = f
	return func() { afterPageReply = prev }
}
