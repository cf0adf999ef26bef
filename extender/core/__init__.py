"""The admission brain of Tower: pure, typed, standard library only."""
