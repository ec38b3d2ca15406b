public import Hummingbird
import Logging
public import NIOCore
import RISCCore

/// The request context: Hummingbird's core storage plus the peer address for the event log.
public struct RISCRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
