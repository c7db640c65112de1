from cortexfs.cli.main import run

run()
