import ArgumentParser
@main struct RiscCommand: ParsableCommand { func run() {} }
