"""Configuration, database engine and sessions, tables, migrations: what every layer stands on."""
