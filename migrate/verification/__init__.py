"""The parts of `migrate.verify` beyond its comparison rules (`migrate.tf1.parity`): `inputs`
(paths, images, output checks), `sides` (the measurement factories), `measuring` (each side in
a fresh process) and `report` (the `VerifyReport`, its table and PNGs)."""
