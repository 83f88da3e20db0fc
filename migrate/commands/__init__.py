"""The commands of `python -m migrate`, one module each, thin over the library modules:

    add_parser(subparsers)   # its subcommand: arguments and help texts
    missing_path(args)       # the first path it names that does not exist (or, for verify, two paths in
                             # the wrong order), as a message, else None; checked before TensorFlow
                             # loads, for every path argument (a command that reads no path has none)
    run(args) -> int         # its run: exit code, one `error:` line for bad input

`common` holds what they share; `migrate.cli` builds the parser from them and dispatches.
"""
