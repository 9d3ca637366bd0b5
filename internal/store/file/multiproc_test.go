package file

const childEnv = "TROUPE_STORE_TEST_CHILD"

func runChild(mode string) int { return 2 }
