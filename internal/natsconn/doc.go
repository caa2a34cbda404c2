// Package natsconn runs and connects to the NATS server that carries
// tickcast's recovery traffic (docs/recovery.md), so that the recovery server
// and client only ever see a *nats.Conn.
//
// # Embedded server
//
// [StartServer] runs a nats-server/v2 inside the feed handler, on loopback by
// default, with an optional set of users, a token, and TLS. Recovery is
// plain request/reply and publish/subscribe: JetStream is off unless
// [ServerConfig.JetStream] turns it on (with a file store in
// [ServerConfig.StoreDir]).
//
// # Cluster and session record
//
// With [ServerConfig.Cluster] the server is one node of a NATS cluster: it
// accepts routes on the cluster port and opens routes to the other nodes
// ([ClusterConfig.Routes], nats-route://host:port). Every node needs its own
// [ServerConfig.Name], kept across restarts. Routes are authenticated when
// [ClusterConfig.Password] is set (the same on every node); a server whose
// clients authenticate refuses a cluster port outside loopback without one.
//
// The two feed handlers of a feed (A and B lines) share their session in a
// JetStream key-value record: bucket [SessionBucket], key the feed name,
// history 1, up to three replicas ([OpenSessionBucket]). They change it by
// compare-and-set on its revision (Create, Update).
//
// # Connecting
//
// [Connect] turns a [ConnConfig] (URL, user/password, token, NKey seed file,
// credentials file, TLS files, inbox prefix) into a connection that reconnects
// forever. A client started before its server keeps trying until the server is
// up; a client that reaches a server which refuses it (wrong password, untrusted
// certificate) fails at once, since retrying would not help. Connection events
// and asynchronous errors, permission violations among them, are reported to a
// log function, and kept in a Prometheus collector ([Metrics], set as
// [ConnConfig.Metrics]): connected or not, reconnects, and the server the
// connection is on.
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
//	             tickcast.FEED.session.*                 tickcast.FEED.session.>
//	             replies to requests it received         tickcast.FEED.repair.>
//	             the session record (below)              tickcast.FEED.demand.*
//	                                                     tickcast.FEED.keys.*
//	                                                     _INBOX_<name>.>
//	subscriber   tickcast.FEED.retransmit.*              tickcast.FEED.live.>
//	             tickcast.FEED.snapshot.*                tickcast.FEED.repair.>
//	             tickcast.FEED.session.*                 _INBOX_<name>.>
//	             tickcast.FEED.demand.*
//	             tickcast.FEED.keys.*
//
// A subscriber with [User.Channels] (entitlements: the users file's fourth
// field, "alice:pw:subscriber:0-1") has the channel subjects of those
// channels only, in place of the wildcards: tickcast.FEED.retransmit.CH,
// .snapshot.CH, .session.CH and .demand.CH to publish, .live.CH, .live.CH.>
// and .repair.CH to subscribe. It keeps tickcast.FEED.keys.*: the feed
// handler's key server refuses the other channels' keys itself, by name,
// so that the subscriber hears why. [Server.SetUsers] replaces the users
// of a running server.
//
// The session record grants of a feed handler are JetStream API requests
// and the record's subject, for bucket tickcast_sessions (stream
// KV_tickcast_sessions) and key FEED only:
//
//	$JS.API.INFO                                       account check before creating
//	$JS.API.STREAM.INFO.KV_tickcast_sessions           look the bucket up
//	$JS.API.STREAM.CREATE.KV_tickcast_sessions         create it
//	$JS.API.DIRECT.GET.KV_tickcast_sessions.$KV.tickcast_sessions.FEED   Get
//	$KV.tickcast_sessions.FEED                         Create, Update
//
// The JetStream replies come to the feed handler's inbox. A feed handler
// may not delete, purge or reconfigure the bucket, nor touch another feed's
// key; a subscriber may not touch the bucket at all.
//
// Every user connects with the inbox prefix _INBOX_<name> (see
// [UserInboxPrefix], [ConnConfig.InboxPrefix]; the programs take it from
// --nats-user, [Flags.InboxPrefix]), so
// the replies to its requests travel on subjects that only it may subscribe
// to: another user cannot read them, and the feed handler's rate limit,
// which keys on the inbox prefix, sees one requester per user.
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
//	        publish: { allow: ["tickcast.tickcast.live.>", "tickcast.tickcast.repair.>", "tickcast.tickcast.session.*",
//	          "$JS.API.INFO", "$JS.API.STREAM.INFO.KV_tickcast_sessions", "$JS.API.STREAM.CREATE.KV_tickcast_sessions",
//	          "$JS.API.DIRECT.GET.KV_tickcast_sessions.$KV.tickcast_sessions.tickcast", "$KV.tickcast_sessions.tickcast"] }
//	        subscribe: { allow: ["tickcast.tickcast.retransmit.>", "tickcast.tickcast.snapshot.>", "tickcast.tickcast.session.>", "tickcast.tickcast.repair.>", "tickcast.tickcast.demand.*", "tickcast.tickcast.keys.*", "_INBOX_fh.>"] }
//	        allow_responses: { max: -1, expires: "2m" } } }
//	    { user: alice, password: "...", permissions: {
//	        publish: { allow: ["tickcast.tickcast.retransmit.*", "tickcast.tickcast.snapshot.*", "tickcast.tickcast.session.*", "tickcast.tickcast.demand.*", "tickcast.tickcast.keys.*"] }
//	        subscribe: { allow: ["tickcast.tickcast.live.>", "tickcast.tickcast.repair.>", "_INBOX_alice.>"] } } }
//	    { user: bob, password: "...", permissions: {   # entitled to channel 2 only
//	        publish: { allow: ["tickcast.tickcast.retransmit.2", "tickcast.tickcast.snapshot.2", "tickcast.tickcast.session.2", "tickcast.tickcast.demand.2", "tickcast.tickcast.keys.2"] }
//	        subscribe: { allow: ["tickcast.tickcast.live.2", "tickcast.tickcast.live.2.>", "tickcast.tickcast.repair.2", "_INBOX_bob.>"] } } }
//	  ]
//	}
//
// and, for the session record, JetStream on (jetstream { store_dir: ... })
// and, in a cluster, a server_name per node and a cluster block with its
// routes.
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
