"""bxmem's benchmarks: `bench/run` prints them (`./dev bench`); the retrieval
corpus and its baseline are modules here, so the CI test can run them too."""
