from ormix.cli.app import main

main()
