package icrc3history

import "github.com/reconciled/reconciled/icrc3"

// Hand-encoded Candid arguments for the block endpoints: they are sent for
// every page, and their shape never changes.

var (
	// icrc3_get_archives's record { from : opt principal } with from = null.
	candidGetArchivesArgs = encodeGetArchivesArgs()
	hashStart             = candidFieldHash("start")
	hashLength            = candidFieldHash("length")
)

func candidFieldHash(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h = h*223 + uint32(s[i])
	}
	return h
}

// appendRangeRecordType appends the type entry record { start: nat; length: nat }.
func appendRangeRecordType(b []byte) []byte {
	b = append(b, 0x6c, 2) // record, 2 fields, in field-id order
	first, second := hashStart, hashLength
	if second < first {
		first, second = second, first
	}
	b = icrc3.AppendUvarint(b, uint64(first))
	b = append(b, 0x7d) // nat
	b = icrc3.AppendUvarint(b, uint64(second))
	return append(b, 0x7d)
}

func appendRangeRecord(b []byte, start, length uint64) []byte {
	if hashStart < hashLength {
		return icrc3.AppendUvarint(icrc3.AppendUvarint(b, start), length)
	}
	return icrc3.AppendUvarint(icrc3.AppendUvarint(b, length), start)
}

// encodeGetBlocksArgs encodes icrc3_get_blocks's vec record { start; length }.
func encodeGetBlocksArgs(ranges ...icrc3.BlockRange) []byte {
	b := make([]byte, 0, 32+len(ranges)*20)
	b = append(b, "DIDL"...)
	b = append(b, 2)       // two type entries
	b = append(b, 0x6d, 1) // 0: vec of type 1
	b = appendRangeRecordType(b)
	b = append(b, 1, 0) // one argument, of type 0
	b = icrc3.AppendUvarint(b, uint64(len(ranges)))
	for _, r := range ranges {
		b = appendRangeRecord(b, r.Start, r.Length)
	}
	return b
}

func encodeGetArchivesArgs() []byte {
	b := append([]byte("DIDL"), 2, 0x6e, 0x68, 0x6c, 1) // 0: opt principal; 1: record, one field
	b = icrc3.AppendUvarint(b, uint64(candidFieldHash("from")))
	return append(b, 0, 1, 1, 0) // from: type 0; one argument of type 1; null
}

// encodeLegacyGetBlocksArgs encodes legacy get_blocks's record { start; length }.
func encodeLegacyGetBlocksArgs(start, length uint64) []byte {
	b := make([]byte, 0, 40)
	b = append(b, "DIDL"...)
	b = append(b, 1)
	b = appendRangeRecordType(b)
	b = append(b, 1, 0)
	return appendRangeRecord(b, start, length)
}
