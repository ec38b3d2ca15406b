public enum TestKit {}
