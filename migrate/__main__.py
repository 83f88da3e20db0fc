from migrate.cli import entry_point

entry_point()
