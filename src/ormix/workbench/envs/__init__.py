"""The ORS environments that ship with ormix: echo, terminals, seta, faulty, and their sandbox."""
