import RISCCore
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
            if setting.key == Self.transmittersSetting.key {
                transmitterChanges(to: new, into: &changes)
            } else if setting.appliedOnReload, let copy = setting.copy {
                copy(&changes.merged, new)
                changes.applied.append(setting.key)
            } else {
                changes.needsRestart.append(setting.key)
            }
        }
        return changes
    }

    /// Each transmitter's action rows are applied (`transmitters.NAME.actions`); any other change
    /// to one, or one added or removed, waits for a restart (`transmitters.NAME`): its keys, path
    /// and credentials are set up at the start.
    func transmitterChanges(to new: ReceiverConfiguration, into changes: inout ConfigurationChanges) {
        let old = Dictionary(transmitters.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let now = Dictionary(new.transmitters.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for name in Set(old.keys).union(now.keys).sorted() {
            guard let before = old[name], let after = now[name] else {
                changes.needsRestart.append("transmitters.\(name)")
                continue
            }
            var (settingsBefore, settingsAfter) = (Self.json(before, table: actionTable), Self.json(after, table: new.actionTable))
            let rowsChanged = settingsBefore["actions"] != settingsAfter["actions"]
            (settingsBefore["actions"], settingsAfter["actions"]) = (nil, nil)
            // Rows follow the issuer: when it changed, they come with it at the restart.
            if rowsChanged, before.issuer == after.issuer && before.issuerAliases == after.issuerAliases {
                changes.merged.actionTable.takeRows(of: [after.issuer] + after.issuerAliases, from: new.actionTable)
                changes.applied.append("transmitters.\(name).actions")
            }
            if settingsBefore != settingsAfter { changes.needsRestart.append("transmitters.\(name)") }
        }
    }
}

extension ConfigurationSource {
    /// A source that reads with `load` and compares by the settings table.
    public init(load: @escaping @Sendable () throws -> ReceiverConfiguration) {
        self.init(load: load, compare: { running, new in running.changes(to: new) })
    }
}
