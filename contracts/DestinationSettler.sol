// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import "./ERC7683.sol";

/// The destination chain's side: a filler pays the recipient through `fill`, once per order.
contract DestinationSettler is IDestinationSettler {
    /// Who filled each order (zero: not filled).
    mapping(bytes32 => address) public filledBy;

    event Filled(bytes32 indexed orderId, address indexed filler, address indexed recipient, uint256 amount);

    error OrderMismatch();
    error WrongChain();
    error AlreadyFilled();
    error FillDeadlinePassed();
    error WrongValue();
    error PaymentFailed();

    /// `originData` is the fill instruction's data from the Open event:
    /// abi.encode(orderId, recipient, amount, fillDeadline, destinationChainId).
    /// `fillerData` may name the filler to repay on the origin chain (abi-encoded address); default the sender.
    function fill(bytes32 orderId, bytes calldata originData, bytes calldata fillerData) external payable {
        (bytes32 id, address recipient, uint256 amount, uint32 fillDeadline, uint64 chainId) =
            abi.decode(originData, (bytes32, address, uint256, uint32, uint64));
        if (id != orderId) revert OrderMismatch();
        if (chainId != block.chainid) revert WrongChain();
        if (filledBy[orderId] != address(0)) revert AlreadyFilled();
        if (block.timestamp > fillDeadline) revert FillDeadlinePassed();
        if (msg.value != amount) revert WrongValue();
        address filler = fillerData.length >= 32 ? abi.decode(fillerData, (address)) : msg.sender;
        filledBy[orderId] = filler == address(0) ? msg.sender : filler;
        (bool ok,) = payable(recipient).call{value: amount}("");
        if (!ok) revert PaymentFailed();
        emit Filled(orderId, filledBy[orderId], recipient, amount);
    }
}
