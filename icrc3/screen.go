package icrc3

// ScreenCandid walks a one-value Candid message with the bounded decoder of
// the block pages before agent-go's reflection decoder sees it. agent-go
// recurses without a depth bound and sizes buffers from lengths it has not
// checked against the input: a crafted reply from a single node (signed,
// but not chained like blocks) could otherwise exhaust the stack or memory
// and take the whole daemon down.
func ScreenCandid(raw []byte) error {
	d := newDecoder(raw)
	ref, err := d.readHeader()
	if err != nil {
		return err
	}
	if err := d.skip(ref, 0); err != nil {
		return err
	}
	return d.finish()
}
