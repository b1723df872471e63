from advisor.launch import entry

entry()
