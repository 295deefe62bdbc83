from ormix.app._cli import main

main()
