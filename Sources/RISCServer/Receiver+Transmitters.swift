import Foundation
import Logging
import RISCClient
import RISCCore

extension Receiver {
    /// One transmitter's keys: a pinned JWK Set, or a cache of its discovery document's JWKS kept
    /// in the data directory (`jwks-cache.json` for Google, `jwks-cache-NAME.json` for the others).
    struct TransmitterKeys {
        let provider: any KeyProvider
        let source: KeySetSource
        let cache: JWKSCache?
    }

    static func keys(
        jwksFile: String?, issuer: String, jwks: JWKSConfiguration, cacheFile: String, configuration: ReceiverConfiguration, logger: Logger, setting: String,
        caFile: String? = nil, clock: @escaping @Sendable () -> Double
    ) throws -> TransmitterKeys {
        if let file = jwksFile {
            let provider = StaticKeyProvider(keys: try pinnedKeySet(file, setting: setting), issuer: issuer)
            return TransmitterKeys(provider: provider, source: .pinned(provider), cache: nil)
        }
        var jwks = jwks
        jwks.persistencePath = (configuration.dataDirectory as NSString).appendingPathComponent(cacheFile)
        let cache = JWKSCache(configuration: jwks, client: CurlHTTPClient(caBundlePath: caFile, pool: .receiver), logger: logger, now: clock)
        return TransmitterKeys(provider: cache, source: .cache(cache), cache: cache)
    }

    /// A pinned key set (`jwks_file`, a transmitter's): a regular file that parses, read alike by
    /// the start and the preflight, each failure a `ConfigurationError` naming the setting.
    static func pinnedKeySet(_ file: String, setting: String) throws -> JWKSet {
        let data: [UInt8]
        do { data = try FileContents.readText(file, regularFile: true) } catch { throw ConfigurationError(problems: ["\(setting): \(error)"]) }
        do { return try JWKSet(json: data) } catch { throw ConfigurationError(problems: ["\(setting): \(file): \(error)"]) }
    }

    /// A poller for each transmitter that delivers by poll (RFC 8936); one whose poll endpoint is
    /// not known yet (no `poll_url`, no stream created) is skipped with a warning.
    static func pollers(_ configuration: ReceiverConfiguration, intake: Intake, leases: any LeaseStore, logger: Logger) throws -> [SSFPoller] {
        var pollers: [SSFPoller] = []
        // Unique to this receiver, even beside another in the same process.
        let owner = "\(configuration.eventLogID ?? ProcessInfo.processInfo.hostName)/\(ProcessInfo.processInfo.processIdentifier)/\(UUID().uuidString.prefix(8))"
        for transmitter in configuration.transmitters where transmitter.delivery == "poll" {
            guard let url = transmitter.pollEndpoint(dataDirectory: configuration.dataDirectory) else {
                logger.warning(
                    "transmitter delivers by poll but its poll endpoint is not known: set poll_url or run `risc stream create --transmitter \(transmitter.name)`",
                    metadata: ["risc.transmitter": "\(transmitter.name)"])
                continue
            }
            let authorization: SSFAuthorization?
            do { authorization = try transmitter.managementAuthorization() } catch { throw ConfigurationError(problems: ["\(error)"]) }
            guard let authorization else { continue }  // a configuration problem, reported before
            var settings = SSFPoller.Settings(
                name: transmitter.name, url: url, path: transmitter.path ?? configuration.eventsPath, owner: owner)
            settings.interval = transmitter.pollInterval
            settings.lease = max(5, configuration.queueLease / 2)
            let client = SSFStreamClient(
                issuer: transmitter.issuer, metadataURL: transmitter.discovery, authorization: authorization, http: CurlHTTPClient(caBundlePath: transmitter.caFile))
            pollers.append(SSFPoller(settings: settings, client: client, intake: intake, leases: leases, logger: logger))
        }
        return pollers
    }

    /// Google (from the top-level settings, unless only other transmitters are configured) and
    /// each configured transmitter, with their keys, in the configuration's order.
    /// Each transmitter with its keys; `clock` is the key caches' (their TTLs and staleness).
    static func transmitters(
        _ configuration: ReceiverConfiguration, logger: Logger, clock: @escaping @Sendable () -> Double
    ) throws -> [(Transmitter, TransmitterKeys)] {
        var built: [(Transmitter, TransmitterKeys)] = []
        if configuration.hasGoogle {
            let issuer = configuration.issuer ?? DiscoveryDocument.googleIssuer
            let keys = try keys(
                jwksFile: configuration.jwksFile, issuer: issuer, jwks: configuration.jwksConfiguration, cacheFile: "jwks-cache.json", configuration: configuration,
                logger: logger, setting: "jwks_file", clock: clock)
            let google = Transmitter(
                name: "google", dialect: .google, issuer: configuration.issuer ?? configuration.jwksConfiguration.expectedIssuer,
                verifier: SETVerifier(policy: configuration.policy, keys: keys.provider))
            built.append((google, keys))
        }
        for settings in configuration.transmitters {
            // Its own discovery and issuer, the cache's timings of the receiver's.
            var jwks = JWKSConfiguration(discoveryURL: settings.discovery, expectedIssuer: settings.issuer)
            let timings = configuration.jwksConfiguration
            (jwks.minimumTTL, jwks.maximumTTL, jwks.unknownKeyCooldown) = (timings.minimumTTL, timings.maximumTTL, timings.unknownKeyCooldown)
            (jwks.maximumStaleness, jwks.failureRetryInterval) = (timings.maximumStaleness, timings.failureRetryInterval)
            let keys = try keys(
                jwksFile: settings.jwksFile, issuer: settings.issuer, jwks: jwks, cacheFile: "jwks-cache-\(settings.name).json", configuration: configuration,
                logger: logger, setting: "transmitters.\(settings.name).jwks_file", caFile: settings.caFile, clock: clock)
            var policy = settings.policy
            policy.clockSkew = configuration.clockSkew
            let authorization: [String]?
            do { authorization = try settings.pushCredential() } catch { throw ConfigurationError(problems: ["\(error)"]) }
            let transmitter = Transmitter(
                name: settings.name, dialect: settings.dialect, issuer: settings.issuer, verifier: SETVerifier(policy: policy, keys: keys.provider),
                path: settings.path == configuration.eventsPath ? nil : settings.path, authorization: authorization)
            built.append((transmitter, keys))
        }
        return built
    }
}
