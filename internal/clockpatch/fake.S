# The code chaos writes into a target to fake its wall clock: the vDSO's
# clock_gettime, gettimeofday and time jump here. It is position
# independent; the four variables sit at the start of its page and the
# harness rewrites them through /proc/PID/mem while the fault holds.
# fake = real + offset + ((real - t0) * rate) >> 32, for the clocks in mask.
# Assemble (TestPayloadIsAssembled checks fake.bin is this):
#   as --64 -o fake.o fake.S && objcopy -O binary -j .text fake.o fake.bin
.intel_syntax noprefix
.text
off_ns: .quad 0
t0:     .quad 0
rate:   .quad 0
mask:   .quad 0
.balign 64
clock_gettime_fake:
    mov eax, 228
    syscall
    test eax, eax
    jnz 9f
    cmp edi, 63
    ja 8f
    mov r8, qword ptr [rip + mask]
    bt r8, rdi
    jnc 8f
    mov rax, qword ptr [rsi]
    imul rax, rax, 1000000000
    add rax, qword ptr [rsi + 8]
    mov rcx, rax
    sub rax, qword ptr [rip + t0]
    imul qword ptr [rip + rate]
    shrd rax, rdx, 32
    add rax, rcx
    add rax, qword ptr [rip + off_ns]
    xor edx, edx
    mov r8d, 1000000000
    div r8
    mov qword ptr [rsi], rax
    mov qword ptr [rsi + 8], rdx
8:  xor eax, eax
9:  ret
.balign 16
gettimeofday_fake:
    push rdi
    push rsi
    mov eax, 96
    syscall
    pop rsi
    pop rdi
    test eax, eax
    jnz 9f
    test rdi, rdi
    jz 9f
    push rdi
    sub rsp, 16
    xor edi, edi
    mov rsi, rsp
    call clock_gettime_fake
    mov rax, qword ptr [rsp]
    mov rcx, qword ptr [rsp + 8]
    add rsp, 16
    pop rdi
    mov qword ptr [rdi], rax
    mov rax, rcx
    xor edx, edx
    mov r8d, 1000
    div r8
    mov qword ptr [rdi + 8], rax
    xor eax, eax
9:  ret
.balign 16
time_fake:
    push rdi
    sub rsp, 16
    xor edi, edi
    mov rsi, rsp
    call clock_gettime_fake
    mov rax, qword ptr [rsp]
    add rsp, 16
    pop rdi
    test rdi, rdi
    jz 1f
    mov qword ptr [rdi], rax
1:  ret
