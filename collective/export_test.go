package collective

// SetConnectHook has f run before a member of this process connects to
// its ring successor (TestMemberDies).
func SetConnectHook(f func()) { testHookConnect = f }
