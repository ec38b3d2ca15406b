/// `host:port` as a URL writes it: an IPv6 address in brackets (`[::1]:8443`), so what risc shows
/// an operator can be pasted into a browser, curl or Google's stream registration.
public func hostPort(_ host: String, _ port: Int) -> String {
    "\(bracketed(host)):\(port)"
}

/// An IPv6 address in brackets, anything else as it is.
public func bracketed(_ host: String) -> String {
    host.contains(":") ? "[\(host)]" : host
}
