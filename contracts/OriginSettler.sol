// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import "./ERC7683.sol";

/// The gateway's order data: native coin in on the origin chain, native coin out on the destination.
struct NativeOrder {
    bytes32 nonce; // chosen by the gateway per intent; with the user it makes the order id
    uint32 openDeadline; // the open must happen by then
    uint32 fillWindow; // seconds after the open the order may be filled; then the user may be refunded
    uint256 inputAmount; // wei locked here
    uint256 outputAmount; // wei the recipient receives on the destination chain
    uint64 destinationChainId;
    bytes32 destinationSettler;
    address recipient;
}

/// Escrow on the origin chain: `open` locks the user's coins, the oracle's `settle` pays the filler
/// once the fill happened, and `refund` returns them to the user when no fill came in time.
contract OriginSettler is IOriginSettler {
    bytes32 public constant NATIVE_ORDER_TYPE = keccak256(
        "NativeOrder(bytes32 nonce,uint32 openDeadline,uint32 fillWindow,uint256 inputAmount,uint256 outputAmount,uint64 destinationChainId,bytes32 destinationSettler,address recipient)"
    );

    enum Status {
        None,
        Opened,
        Settled,
        Refunded
    }

    struct Escrow {
        address user;
        uint32 fillDeadline;
        Status status;
        uint256 amount;
    }

    /// The only account that may settle (the gateway's solver service).
    address public immutable oracle;
    mapping(bytes32 => Escrow) public escrows;

    event Settled(bytes32 indexed orderId, address indexed filler, uint256 amount);
    event Refunded(bytes32 indexed orderId, address indexed user, uint256 amount);

    error WrongOrderType();
    error OpenDeadlinePassed();
    error FillDeadlineTooSoon();
    error WrongValue();
    error BadAmounts();
    error AlreadyOpened();
    error NotOracle();
    error NotOpen();
    error FillDeadlineNotPassed();
    error PaymentFailed();

    constructor(address oracle_) {
        oracle = oracle_;
    }

    /// The id of `user`'s order with `nonce` on this settler and chain.
    function orderIdOf(address user, bytes32 nonce) public view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, address(this), user, nonce));
    }

    function open(OnchainCrossChainOrder calldata order) external payable {
        ResolvedCrossChainOrder memory resolved = _resolve(order, msg.sender);
        NativeOrder memory o = abi.decode(order.orderData, (NativeOrder));
        if (block.timestamp > o.openDeadline) revert OpenDeadlinePassed();
        if (msg.value != o.inputAmount) revert WrongValue();
        Escrow storage e = escrows[resolved.orderId];
        if (e.status != Status.None) revert AlreadyOpened();
        e.user = msg.sender;
        e.fillDeadline = resolved.fillDeadline;
        e.status = Status.Opened;
        e.amount = msg.value;
        emit Open(resolved.orderId, resolved);
    }

    function resolve(OnchainCrossChainOrder calldata order) external view returns (ResolvedCrossChainOrder memory) {
        return _resolve(order, msg.sender);
    }

    /// Pays the escrowed amount to the filler; the oracle calls it once the fill is confirmed.
    function settle(bytes32 orderId, address filler) external {
        if (msg.sender != oracle) revert NotOracle();
        Escrow storage e = escrows[orderId];
        if (e.status != Status.Opened) revert NotOpen();
        e.status = Status.Settled;
        _pay(filler, e.amount);
        emit Settled(orderId, filler, e.amount);
    }

    /// Returns the escrowed amount to the user; anyone may call it after the fill deadline.
    function refund(bytes32 orderId) external {
        Escrow storage e = escrows[orderId];
        if (e.status != Status.Opened) revert NotOpen();
        if (block.timestamp <= e.fillDeadline) revert FillDeadlineNotPassed();
        e.status = Status.Refunded;
        _pay(e.user, e.amount);
        emit Refunded(orderId, e.user, e.amount);
    }

    function _resolve(OnchainCrossChainOrder calldata order, address user) internal view returns (ResolvedCrossChainOrder memory r) {
        if (order.orderDataType != NATIVE_ORDER_TYPE) revert WrongOrderType();
        NativeOrder memory o = abi.decode(order.orderData, (NativeOrder));
        if (o.outputAmount == 0 || o.outputAmount > o.inputAmount) revert BadAmounts();
        uint32 fillDeadline = uint32(block.timestamp) + o.fillWindow;
        if (order.fillDeadline < fillDeadline) revert FillDeadlineTooSoon();
        bytes32 orderId = orderIdOf(user, o.nonce);
        r.user = user;
        r.originChainId = block.chainid;
        r.openDeadline = o.openDeadline;
        r.fillDeadline = fillDeadline;
        r.orderId = orderId;
        r.maxSpent = new Output[](1);
        r.maxSpent[0] = Output(bytes32(0), o.inputAmount, bytes32(0), block.chainid);
        r.minReceived = new Output[](1);
        r.minReceived[0] = Output(bytes32(0), o.outputAmount, bytes32(uint256(uint160(o.recipient))), o.destinationChainId);
        r.fillInstructions = new FillInstruction[](1);
        r.fillInstructions[0] = FillInstruction(
            o.destinationChainId,
            o.destinationSettler,
            abi.encode(orderId, o.recipient, o.outputAmount, fillDeadline, o.destinationChainId)
        );
    }

    function _pay(address to, uint256 amount) internal {
        (bool ok,) = payable(to).call{value: amount}("");
        if (!ok) revert PaymentFailed();
    }
}
