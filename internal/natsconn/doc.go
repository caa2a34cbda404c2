// Package natsconn runs and connects to the NATS server that carries
// tickcast's recovery traffic (docs/recovery.md), so that the recovery server
// and client only ever see a *nats.Conn.
//
// # Embedded server
//
// [StartServer] runs a nats-server/v2 inside the feed handler, on loopback by
// default, with an optional set of users, a token, and TLS. JetStream is not
// enabled: recovery is plain request/reply and publish/subscribe.
//
// # Connecting
//
// [Connect] turns a [ConnConfig] (URL, user/password, token, NKey seed file,
// credentials file, TLS files, inbox prefix) into a connection that reconnects
// forever. A client started before its server keeps trying until the server is
// up; a client that reaches a server which refuses it (wrong password, untrusted
// certificate) fails at once, since retrying would not help. Connection events
// and asynchronous errors, permission violations among them, are reported to a
// log function.
//
// # Users, roles and permissions
//
// Without users, the embedded server lets every client do anything (and with
// [ServerConfig.Token], every client that presents the token). With users
// ([ServerConfig.Users], from [ParseUsers] or [LoadUsersFile]), each user has
// a [Role] and the server enforces, for feed FEED:
//
//	role         publish                                 subscribe
//	feedhandler  tickcast.FEED.live.>                    tickcast.FEED.retransmit.>
//	             tickcast.FEED.repair.>                  tickcast.FEED.snapshot.>
//	             replies to requests it received         tickcast.FEED.session.>
//	                                                     tickcast.FEED.repair.>
//	subscriber   tickcast.FEED.retransmit.*              tickcast.FEED.live.>
//	             tickcast.FEED.snapshot.*                tickcast.FEED.repair.>
//	             tickcast.FEED.session.*                 _INBOX_<name>.>
//
// A subscriber connects with the inbox prefix _INBOX_<name> (see
// [UserInboxPrefix] and [ConnConfig.InboxPrefix]), so the replies to its
// requests travel on subjects that only it may subscribe to: another user
// cannot read them, and the feed handler's rate limit, which keys on the
// inbox prefix, sees one requester per user.
//
// The feed handler answers with NATS response permissions (allow_responses)
// rather than a publish grant on inbox subjects. A response permission lets it
// publish only to the reply subject of a request it actually received, for
// [ReplyWindow] after it; a multi-part reply may have any number of parts. A
// publish grant on _INBOX.> would let it write into any inbox at any time, and
// would not even cover the per-user prefixes (a subject token cannot be
// partially wildcarded, so _INBOX_* is not a pattern): the only grant that
// would is ">", everything.
//
// An external NATS server (--nats-url) needs the same rules; in nats-server
// configuration syntax, for feed "tickcast" and users "fh" and "alice":
//
//	authorization {
//	  users = [
//	    { user: fh, password: "...", permissions: {
//	        publish: { allow: ["tickcast.tickcast.live.>", "tickcast.tickcast.repair.>"] }
//	        subscribe: { allow: ["tickcast.tickcast.retransmit.>", "tickcast.tickcast.snapshot.>", "tickcast.tickcast.session.>", "tickcast.tickcast.repair.>"] }
//	        allow_responses: { max: -1, expires: "2m" } } }
//	    { user: alice, password: "...", permissions: {
//	        publish: { allow: ["tickcast.tickcast.retransmit.*", "tickcast.tickcast.snapshot.*", "tickcast.tickcast.session.*"] }
//	        subscribe: { allow: ["tickcast.tickcast.live.>", "tickcast.tickcast.repair.>", "_INBOX_alice.>"] } } }
//	  ]
//	}
//
// Passwords may be given as bcrypt hashes (as made by "nats server passwd"),
// which nats-server recognises by their "$2" prefix.
//
// NATS checks a publisher's subject, not the reply subject it names, so a
// subscriber could name another user's inbox as the reply subject of a
// request: the reply would land in that inbox, where the owner's client
// drops it as unknown, and it would count against the owner's rate limit. It
// cannot read anything it is not allowed to.
package natsconn
