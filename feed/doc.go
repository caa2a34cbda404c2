// Package feed is tickcast's normalized market-data model: the messages a feed
// handler publishes (instrument definitions, quotes, trades, trade busts,
// trading status, price-level deltas), their fixed-size binary codec, the Source
// interface that upstream decoders implement, and a deterministic synthetic
// source.
//
// # Wire layout
//
// Every message starts with the same 36-byte header (type, version, flags,
// instrument id, per-instrument sequence number, exchange, receive and send
// timestamps) followed by a body whose size is fixed for each type and version.
// All integers are little-endian. Prices are signed 64-bit integers scaled by
// 10^PriceScale, where PriceScale is stated in the instrument's definition.
// docs/wire-format.md documents every byte and carries hex vectors that the
// tests parse, so the document and the code cannot drift apart.
//
// A decoder accepts a message longer than the size it knows for that type and
// version (a newer version may append fields; the extra bytes are ignored) and
// rejects a shorter one with a *DecodeError naming the type and length.
//
// # Allocation
//
// Encoding writes into a caller-supplied buffer and decoding fills a
// caller-supplied struct; neither allocates. The per-instrument sequence
// number lets a subscriber that lost a range of channel messages learn which
// instruments the loss touched.
package feed
