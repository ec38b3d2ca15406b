public enum RISCClient {}
