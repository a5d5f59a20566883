from teamgraph.cli import app

app()
