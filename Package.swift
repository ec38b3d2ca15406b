// swift-tools-version: 6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "risc",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "risc", targets: ["risc"]),
        .library(name: "RISCCore", targets: ["RISCCore"]),
        .library(name: "RISCClient", targets: ["RISCClient"]),
        .library(name: "RISCTestKit", targets: ["RISCTestKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C helpers over the system's libcrypto (libssl-dev) and libcurl (libcurl4-openssl-dev).
        .target(name: "CRiscOpenSSL", linkerSettings: [.linkedLibrary("crypto")]),
        .target(name: "CRiscCurl", linkerSettings: [.linkedLibrary("curl")]),
        // Starting children with every other descriptor closed (`closefrom`): `ChildProcess`, and
        // the daemons tests start (a throwaway PostgreSQL).
        .target(name: "CRiscSpawn"),
        // The system's SQLite (libsqlite3-dev).
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // The domain: JOSE on OpenSSL, SET claims and policy, events, subjects, errors. No HTTP, no storage.
        .target(
            name: "RISCCore",
            dependencies: ["CRiscOpenSSL", "CRiscSpawn", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // Outbound HTTP over libcurl: discovery document, JWKS cache.
        .target(
            name: "RISCClient",
            dependencies: ["RISCCore", "CRiscCurl", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // What a receiver keeps in its data directory besides a store: the JSON-lines event log,
        // the data-directory lock, the token-key file. Either backend uses them.
        .target(name: "RISCLocal", dependencies: ["RISCCore"], swiftSettings: swiftSettings),
        // The cold paths' statements, written once in the SQL both drivers speak.
        .target(name: "RISCSQL", dependencies: ["RISCCore"], swiftSettings: swiftSettings),
        // The embedded backend: SQLite in the data directory (group commit, the queue, the accounts).
        .target(
            name: "RISCSQLite",
            dependencies: ["RISCCore", "RISCLocal", "RISCSQL", "CSQLite", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // The PostgreSQL backend (several receivers on one database): store URL, schema, durability checks.
        .target(
            name: "RISCPostgres",
            dependencies: [
                "RISCCore",
                "RISCSQL",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The one storage factory: opens the driver the settings name; only it imports one.
        .target(
            name: "RISCStorage",
            dependencies: ["RISCCore", "RISCLocal", "RISCSQL", "RISCSQLite", "RISCPostgres", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // The HTTP layer: the RFC 8935 endpoint straight on SwiftNIO; health, metrics and the
        // admin API over Hummingbird.
        .target(
            name: "RISCServer",
            dependencies: [
                "RISCCore", "RISCClient", "RISCLocal", "RISCStorage",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        // Configuration as a library: the config file (TOML, JSON), the layers (flags, RISC_*
        // variables, file, defaults), the key table, --print-config and the reference page's table.
        .target(
            name: "RISCConfig",
            dependencies: [
                "RISCCore", "RISCClient", "RISCStorage", "RISCServer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            swiftSettings: swiftSettings
        ),
        // Test keys, SET factory, a loopback HTTP server: used by tests and by `risc sign`/`dev-issuer`.
        .target(name: "RISCTestKit", dependencies: ["RISCCore", "RISCClient", "CRiscSpawn", .product(name: "Logging", package: "swift-log")], swiftSettings: swiftSettings),
        // libFuzzer targets (scripts/fuzz builds them with -sanitize=fuzzer -DFUZZING); built
        // normally they replay input files, which the tests use for the kept crash inputs.
        .target(name: "FuzzSupport", swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzSET", dependencies: ["RISCCore", "FuzzSupport"], swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzJWKS", dependencies: ["RISCCore", "RISCClient", "FuzzSupport"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "FuzzFiles", dependencies: ["RISCLocal", "RISCSQLite", "RISCConfig", "FuzzSupport"], swiftSettings: swiftSettings),
        // The commit `risc --version` prints, generated at build time.
        .plugin(name: "BuildInfo", capability: .buildTool()),
        .executableTarget(
            name: "risc",
            dependencies: [
                "RISCCore", "RISCClient", "RISCLocal", "RISCStorage", "RISCServer", "RISCConfig", "RISCTestKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["BuildInfo"]
        ),
        .testTarget(
            name: "RISCLocalTests",
            dependencies: ["RISCLocal", "RISCCore", "RISCTestKit"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RISCCoreTests",
            dependencies: ["RISCCore", "RISCTestKit"],
            resources: [.copy("Vectors")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RISCClientTests",
            dependencies: ["RISCClient", "RISCCore", "RISCTestKit", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RISCSQLiteTests",
            dependencies: ["RISCSQLite", "RISCSQL", "RISCLocal", "RISCCore", "RISCTestKit", "CSQLite", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RISCPostgresTests",
            dependencies: [
                "RISCPostgres", "RISCSQL", "RISCCore", "RISCTestKit", .product(name: "Logging", package: "swift-log"), .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RISCServerTests",
            dependencies: [
                "RISCServer", "RISCConfig", "RISCStorage", "RISCSQLite", "RISCLocal", "RISCPostgres", "RISCClient", "RISCCore", "RISCTestKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"), .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RISCConfigTests",
            dependencies: ["RISCConfig", "RISCServer", "RISCStorage", "RISCCore", "RISCTestKit"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "riscTests",
            dependencies: [
                "RISCTestKit", "RISCCore", "RISCClient", "RISCLocal", "RISCStorage", "RISCPostgres", "RISCSQLite", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
