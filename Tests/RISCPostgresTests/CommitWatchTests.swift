import Foundation
import NIOCore
import RISCCore
import RISCTestKit
import Testing

@testable import RISCPostgres

/// A batch stored by the one-statement path is answered at the ReadyForQuery that follows its
/// COMMIT, read off the connection (`CommitWatch`), instead of after a `SELECT 1` sent to confirm
/// it: one round trip a batch, not two.
@Suite("PostgreSQL: a batch's COMMIT read off the connection", .serialized)
struct CommitWatchTests {
    typealias F = PostgresFoundationTests

    // MARK: The protocol's messages, as bytes

    static func message(_ type: Character, _ body: [UInt8] = []) -> [UInt8] {
        let length = UInt32(body.count + 4)
        return [type.asciiValue!] + withUnsafeBytes(of: length.bigEndian, Array.init) + body
    }

    static func cstring(_ text: String) -> [UInt8] { Array(text.utf8) + [0] }

    /// What PostgresNIO writes to run the batch statement: a Bind of it, an Execute, a Sync.
    static let batchWritten =
        message("B", cstring("") + cstring(StoreBatch.name) + [0, 0, 0, 0, 0, 0]) + message("E", cstring("") + [0, 0, 0, 0]) + message("S")
    /// Another query: Parse, Bind, Describe, Execute, Sync.
    static let otherWritten =
        message("P", cstring("") + cstring("SELECT 1") + [0, 0]) + message("B", cstring("") + cstring("") + [0, 0, 0, 0, 0, 0])
        + message("D", [UInt8(ascii: "P")] + cstring("")) + message("E", cstring("") + [0, 0, 0, 0]) + message("S")
    static func ready(_ status: Character = "I") -> [UInt8] { message("Z", [status.asciiValue!]) }
    /// A batch's answer: BindComplete, two rows, CommandComplete, then `end`.
    static func batchAnswer(_ end: [UInt8]) -> [UInt8] {
        message("2") + message("D", [0, 1, 0, 0, 0, 3] + Array("set".utf8)) + message("D", [0, 1, 0, 0, 0, 3] + Array("set".utf8))
            + message("C", cstring("INSERT 0 2")) + end
    }
    static let error = message("E", [UInt8(ascii: "S")] + cstring("ERROR") + [UInt8(ascii: "C")] + cstring("23514") + [0])

    /// Feeds `written`, then `read` split into pieces at `cut` (every cut of it, in the tests).
    static func outcomes(written: [UInt8], read: [UInt8], cuts: [Int]) -> (ended: [Int: CommitWatch.Outcome], lost: Bool) {
        var messages = ProtocolMessages(statement: StoreBatch.name)
        messages.wrote(ByteBuffer(bytes: written))
        var ended: [Int: CommitWatch.Outcome] = [:]
        var start = 0
        for cut in cuts + [read.count] where cut >= start {
            for (number, outcome) in messages.read(ByteBuffer(bytes: read[start..<cut])) { ended[number] = outcome }
            start = cut
        }
        return (ended, messages.lost)
    }

    @Test("a batch statement's ReadyForQuery, idle, after no error: committed; read in pieces cut anywhere")
    func committedInPieces() {
        let read = Self.batchAnswer(Self.ready())
        for cut in 0...read.count {
            for second in cut...read.count {
                let (ended, lost) = Self.outcomes(written: Self.batchWritten, read: read, cuts: [cut, second])
                #expect(ended == [1: .committed] && !lost, "cut at \(cut) and \(second)")
            }
        }
    }

    @Test("an error before the ReadyForQuery (a COMMIT refused), or a transaction left open: failed")
    func failedCommits() {
        #expect(Self.outcomes(written: Self.batchWritten, read: Self.batchAnswer(Self.error + Self.ready()), cuts: []).ended == [1: .failed])
        #expect(Self.outcomes(written: Self.batchWritten, read: Self.batchAnswer(Self.ready("T")), cuts: []).ended == [1: .failed])
        #expect(Self.outcomes(written: Self.batchWritten, read: Self.batchAnswer(Self.ready("E")), cuts: []).ended == [1: .failed])
    }

    @Test("each ReadyForQuery answers the Sync of its turn: other queries' answers are not taken for a batch's")
    func matchedInOrder() {
        // Another query, a batch, another query, a batch, written at once; answered in order.
        let written = Self.otherWritten + Self.batchWritten + Self.otherWritten + Self.batchWritten
        let other = Self.message("1") + Self.message("2") + Self.message("T", [0, 0]) + Self.message("C", Self.cstring("SELECT 1"))
        let read = other + Self.ready() + Self.batchAnswer(Self.error + Self.ready()) + other + Self.ready() + Self.batchAnswer(Self.ready())
        var messages = ProtocolMessages(statement: StoreBatch.name)
        messages.wrote(ByteBuffer(bytes: written))
        #expect(messages.numbered == 2)
        let first = messages.read(ByteBuffer(bytes: read[0..<(other.count + 6)]))
        #expect(first.isEmpty, "the other query's ReadyForQuery ends no batch")
        let rest = messages.read(ByteBuffer(bytes: read[(other.count + 6)...]))
        #expect(rest.map(\.number) == [1, 2] && rest.map(\.outcome) == [.failed, .committed])
        // A ReadyForQuery for which no Sync was written: the watch no longer knows where it is.
        _ = messages.read(ByteBuffer(bytes: Self.ready()))
        #expect(messages.lost)
    }

    @Test("bytes that are not the protocol's messages: the watch tells nothing more, both ways")
    func lostForGood() {
        #expect(Self.outcomes(written: Self.batchWritten, read: Array("HTTP/1.1 200 OK\r\n".utf8), cuts: []).lost)
        #expect(Self.outcomes(written: Self.batchWritten, read: Self.message("Z", [1, 2]), cuts: []).lost, "a ReadyForQuery is 5 bytes")
        #expect(Self.outcomes(written: Self.batchWritten, read: Self.message("Z", [UInt8(ascii: "X")]), cuts: []).lost)
        var messages = ProtocolMessages(statement: StoreBatch.name)
        messages.wrote(ByteBuffer(bytes: [0x16, 3, 1, 0, 200]))  // a TLS record, not a message
        #expect(messages.lost && messages.read(ByteBuffer(bytes: Self.batchAnswer(Self.ready()))).isEmpty)
    }

    @Test("what the server said before the watch's first Sync is not read: it joined an idle connection")
    func readsFromItsFirstSync() {
        var messages = ProtocolMessages(statement: StoreBatch.name)
        #expect(messages.read(ByteBuffer(bytes: Self.ready())).isEmpty && !messages.lost)
        messages.wrote(ByteBuffer(bytes: Self.batchWritten))
        #expect(messages.read(ByteBuffer(bytes: Self.batchAnswer(Self.ready()))).map(\.outcome) == [.committed])
    }

    // MARK: On a real server

    /// `SELECT 1` statements the server ran (its log, `log_statement = 'all'`) from byte `from` of it.
    static func confirmations(_ cluster: PostgresCluster, from: Int) throws -> Int {
        let log = try Data(contentsOf: URL(fileURLWithPath: cluster.directory + "/server.log"))
        return String(decoding: log.dropFirst(from), as: UTF8.self).components(separatedBy: "execute <unnamed>: SELECT 1\n").count - 1
    }

    static func logSize(_ cluster: PostgresCluster) throws -> Int {
        try Data(contentsOf: URL(fileURLWithPath: cluster.directory + "/server.log")).count
    }

    /// Appends SETs one after the other (a batch each) and counts the server's `SELECT 1`s meanwhile.
    static func appendOneByOne(_ count: Int, to store: PostgresEventStore, cluster: PostgresCluster, prefix: String) async throws -> (confirmations: Int, accepted: Int) {
        try await cluster.psql("ALTER SYSTEM SET log_statement = 'all'")
        try await cluster.psql("SELECT pg_reload_conf()")
        let from = try logSize(cluster)
        let factory = SETFactory(signer: PostgresEventStoreTests.keys.entry(for: .eddsa)!.signer)
        var accepted = 0
        for index in 0..<count {
            let record = try await factory.storedRecord(
                type: .sessionsRevoked, subject: factory.accountSubject("\(index)"), jti: "\(prefix)-\(index)", keys: try PostgresEventStoreTests.keys.jwks)
            if case .accepted = try await store.append(record) { accepted += 1 }
        }
        return (try confirmations(cluster, from: from), accepted)
    }

    /// A throwaway cluster, a migrated store on it (`prepare` readies the cluster and gives the
    /// URL to reach it by), then `body`; both stopped after.
    static func withStore(
        commitDeadline: Double = 600, prepare: (PostgresCluster) async throws -> String = { $0.url },
        _ body: (PostgresCluster, PostgresEventStore) async throws -> Void
    ) async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let database = PostgresDatabase(url: try PostgresStoreURL(try await prepare(cluster)), password: nil, logger: F.logger)
        try await database.migrate()
        try await body(cluster, PostgresEventStore(database: database, commitDeadline: commitDeadline))
        database.close()
        try await cluster.stop()
    }

    @Test("20 SETs stored one after the other: 20 batches, each answered without a SELECT 1 to confirm its COMMIT")
    func noConfirmingQuery() async throws {
        try await Self.withStore { cluster, store in
            let (confirmations, accepted) = try await Self.appendOneByOne(20, to: store, cluster: cluster, prefix: "watched")
            #expect(accepted == 20 && store.writeCounts.commits == 20)
            // Before: one `SELECT 1` a batch. A pool's keep-alive could add one.
            #expect(confirmations <= 1, "\(confirmations) SELECT 1 for 20 batches")
            #expect(try await cluster.psql("SELECT count(*) FROM sets WHERE jti LIKE 'watched-%'") == "20")
        }
    }

    @Test("each batch is committed on the pool's event loop, where its replies are read (no hop to the cooperative pool at each await)")
    func committedOnTheLoop() async throws {
        try await Self.withStore { cluster, store in
            let (_, accepted) = try await Self.appendOneByOne(10, to: store, cluster: cluster, prefix: "loop")
            #expect(accepted == 10 && store.writeCounts.commits == 10)
            // Before: every batch, on a thread of the cooperative pool.
            #expect(store.batchesOffLoop == 0)
        }
    }

    /// Has the cluster serve TLS with `certificate` from its next reload.
    static func serveTLS(_ cluster: PostgresCluster, certificate: TestCertificate) async throws {
        // The server reads its key only if the key is its user's and no one else's.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: certificate.keyPath)
        if geteuid() == 0 {
            for path in [certificate.certificatePath, certificate.keyPath] {
                try FileManager.default.setAttributes([.ownerAccountName: "postgres", .groupOwnerAccountName: "postgres"], ofItemAtPath: path)
            }
        }
        try await cluster.psql("ALTER SYSTEM SET ssl_cert_file = '\(certificate.certificatePath)'")
        try await cluster.psql("ALTER SYSTEM SET ssl_key_file = '\(certificate.keyPath)'")
        try await cluster.psql("ALTER SYSTEM SET ssl = on")
    }

    @Test("behind TLS (sslmode=require) the watch reads the decrypted messages: no SELECT 1 either")
    func behindTLS() async throws {
        try await Self.withStore(prepare: { cluster in
            try await Self.serveTLS(cluster, certificate: try TestCertificate(directory: URL(fileURLWithPath: cluster.directory)))
            try await cluster.psql("SELECT pg_reload_conf()")
            return cluster.tcpURL + "?sslmode=require"
        }) { cluster, store in
            let (confirmations, accepted) = try await Self.appendOneByOne(10, to: store, cluster: cluster, prefix: "tls")
            #expect(accepted == 10)
            #expect(confirmations <= 1, "\(confirmations) SELECT 1 for 10 batches")
            #expect(try await cluster.psql("SELECT count(*) FROM pg_stat_ssl WHERE ssl") != "0", "the store's connections use TLS")
        }
    }

    /// Found: the store's TLS client offered NIOSSL's default TLS 1.2 suites, RSA key transport
    /// and CBC included, so a server that offered only those (`ssl_ciphers = 'AES128-SHA'`) was
    /// used: no forward secrecy for the SETs and account data on the wire. The client offers what
    /// the listeners do (RFC 9325): ECDHE with an AEAD cipher, or TLS 1.3.
    @Test("the store's TLS client refuses a server that offers only RSA key transport or CBC suites; one offering ECDHE + AES-GCM is used")
    func clientCipherSuites() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        try await Self.serveTLS(
            cluster, certificate: try TestCertificate(directory: URL(fileURLWithPath: cluster.directory).appendingPathComponent("rsa"), rsa: true))
        try await cluster.psql("ALTER SYSTEM SET ssl_max_protocol_version = 'TLSv1.2'")
        func connects(ciphers: String) async throws -> Bool {
            try await cluster.psql("ALTER SYSTEM SET ssl_ciphers = '\(ciphers)'")
            try await cluster.psql("SELECT pg_reload_conf()")
            let database = PostgresDatabase(url: try PostgresStoreURL(cluster.tcpURL + "?sslmode=require"), password: nil, logger: F.logger)
            defer { database.close() }
            do {
                try await database.probe()
                return true
            } catch {
                // A handshake that finds no suite both offer is named, as what waiting will not fix.
                #expect((error as? StoreError)?.code == .refused && "\(error)".contains("TLS"), "\(error)")
                return false
            }
        }
        #expect(try await !connects(ciphers: "AES128-SHA:AES256-GCM-SHA384"), "RSA key transport")
        #expect(try await !connects(ciphers: "ECDHE-RSA-AES128-SHA"), "CBC")
        #expect(try await connects(ciphers: "ECDHE-RSA-AES128-GCM-SHA256"))
        try await cluster.stop()
    }

    @Test("a COMMIT that fails after the statement's rows (a deferred constraint): the SET is answered with that error at once, not stored; the next is stored")
    func commitRefused() async throws {
        // Before, the batch's confirming `SELECT 1` never ran (PostgresNIO closes a connection on an
        // error after CommandComplete), and the SET waited out the store's whole deadline.
        try await Self.withStore(commitDeadline: 30) { cluster, store in
            // Checked at COMMIT, after the statement has sent its rows back.
            try await cluster.psql(
                """
                CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN IF NEW.jti = 'refused' THEN RAISE EXCEPTION 'refused at COMMIT'; END IF; RETURN NULL; END $$;
                CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON sets DEFERRABLE INITIALLY DEFERRED
                FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();
                """)
            let factory = SETFactory(signer: PostgresEventStoreTests.keys.entry(for: .eddsa)!.signer)
            let keys = try PostgresEventStoreTests.keys.jwks
            let refused = try await factory.storedRecord(type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: "refused", keys: keys)
            let error = await #expect(throws: StoreError.self) { try await store.append(refused) }
            #expect(
                error?.code == .unavailable && error?.description.contains("COMMIT failed") == true,
                "answered at once, not at the deadline: \(String(describing: error))")
            let next = try await factory.storedRecord(type: .sessionsRevoked, subject: factory.accountSubject("2"), jti: "next", keys: keys)
            if case .accepted = try await store.append(next) {} else { Issue.record("the next SET was not stored") }
            #expect(try await cluster.psql("SELECT string_agg(jti, ',') FROM sets") == "next")
        }
    }

    /// Found with the queue's: a batch the server refused was answered (and its `failed` line
    /// logged) with PostgresNIO's "Generic description to prevent accidental leakage".
    @Test("a batch the server refuses is answered with the server's message and SQLSTATE")
    func refusedInItsWords() async throws {
        try await Self.withStore(commitDeadline: 30) { cluster, store in
            try await cluster.psql("ALTER TABLE sets RENAME COLUMN token TO token_renamed")
            let factory = SETFactory(signer: PostgresEventStoreTests.keys.entry(for: .eddsa)!.signer)
            let record = try await factory.storedRecord(
                type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: "renamed", keys: try PostgresEventStoreTests.keys.jwks)
            let error = await #expect(throws: (any Error).self) { try await store.append(record) }
            let told = error.map { String(describing: $0) } ?? ""
            #expect(told.contains("PostgreSQL said:") && told.contains("SQLSTATE 42703") && !told.contains("Generic description"), "\(told)")
        }
    }
}
