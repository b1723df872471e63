from advisor.cli import entry

entry()
