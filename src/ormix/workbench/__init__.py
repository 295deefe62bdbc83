"""Tools for CPU work that ship with ormix: the `local:` environments (`ormix.workbench.envs`), the offline
tiny model, a scripted policy, the warm start (SFT on reference solutions) and a stand-in for TRL's vLLM
server. The app uses them for its defaults and the tests use them; the library never imports them (a
`local:NAME` target names one of these environments' modules, loaded by name like a `module:` target).
"""
