public import RISCServer

extension ReceiverConfiguration {
    /// The settings SIGHUP applies without a restart (`Setting.reloaded` in `settings`). Everything
    /// else (listeners, paths, TLS file names, the store, keys and audiences, webhook, linking) is
    /// read at the start only; a change to it is logged as waiting for the next start.
    public static var reloadableKeys: Set<String> { Set(settings.filter(\.appliedOnReload).map(\.key)) }

    /// How `new` differs from this configuration, setting by setting: what SIGHUP applies (taken
    /// into `merged`) and what waits for a restart.
    public func changes(to new: ReceiverConfiguration) -> ConfigurationChanges {
        var changes = ConfigurationChanges(merged: self)
        for setting in Self.settings where setting.value(self) != setting.value(new) {
            if setting.appliedOnReload, let copy = setting.copy {
                copy(&changes.merged, new)
                changes.applied.append(setting.key)
            } else {
                changes.needsRestart.append(setting.key)
            }
        }
        return changes
    }
}

extension ConfigurationSource {
    /// A source that reads with `load` and compares by the settings table.
    public init(load: @escaping @Sendable () throws -> ReceiverConfiguration) {
        self.init(load: load, compare: { running, new in running.changes(to: new) })
    }
}
